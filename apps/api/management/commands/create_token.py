from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.api.models import ApiToken
from apps.api.services import create_token_for_username


class Command(BaseCommand):
    help = "Create an API token for a user. The key is printed once, as the last word of the output; only its hash is kept."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--scope", required=True, choices=ApiToken.Scope.values)
        parser.add_argument("--name", default="")

    def handle(self, *args, user: str, scope: str, name: str, **options):
        try:
            token, key = create_token_for_username(user, scope, name)
        except get_user_model().DoesNotExist:
            raise CommandError(
                f"no user named {user!r}: create it first (make run does, or manage.py createsuperuser)"
            ) from None
        self.stdout.write(
            f"Created {scope} token {token.prefix}… for {user}. Keep it now, it is not shown again: {key}"
        )
