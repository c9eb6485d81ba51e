import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = (
        "Create the first login if no user exists: CPUTUNE_ADMIN_USER / CPUTUNE_ADMIN_PASSWORD, "
        "or a generated password printed once."
    )

    def handle(self, *args, **options):
        import os

        User = get_user_model()
        if User.objects.exists():
            self.stdout.write("A login already exists; not creating another.")
            return
        username = settings.CPUTUNE_ADMIN_USER
        password = os.environ.get("CPUTUNE_ADMIN_PASSWORD", "")
        generated = not password
        if generated:
            password = secrets.token_urlsafe(12)
        User.objects.create_superuser(username=username, password=password, email="")
        if generated:
            self.stdout.write(
                self.style.WARNING(
                    f"Created login {username!r} with password {password}  — shown only now; "
                    "change it in the admin, or set CPUTUNE_ADMIN_PASSWORD next time on a fresh database."
                )
            )
        else:
            self.stdout.write(f"Created login {username!r} from CPUTUNE_ADMIN_USER / CPUTUNE_ADMIN_PASSWORD.")
