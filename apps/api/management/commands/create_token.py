from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from apps.api.models import ApiToken
from apps.api.services import create_token_for_username
from apps.clusters.models import Cluster


class Command(BaseCommand):
    help = "Create an API token for a user. The key is printed once, as the last word of the output; only its hash is kept."

    def add_arguments(self, parser):
        parser.add_argument("--user", required=True)
        parser.add_argument("--scope", required=True, choices=ApiToken.Scope.values)
        parser.add_argument("--name", default="")
        parser.add_argument(
            "--cluster",
            default=None,
            help="ingest tokens only: bind the token to this cluster (without it, the agent's node name picks the cluster)",
        )

    def handle(self, *args, user: str, scope: str, name: str, cluster: str | None, **options):
        try:
            token, key = create_token_for_username(user, scope, name, cluster)
        except get_user_model().DoesNotExist:
            raise CommandError(
                f"no user named {user!r}: create it first (make run does, or manage.py createsuperuser)"
            ) from None
        except Cluster.DoesNotExist:
            raise CommandError(f"no cluster named {cluster!r}: register it first (manage.py add_cluster)") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        bound = f" bound to cluster {cluster}" if cluster else ""
        self.stdout.write(
            f"Created {scope} token {token.prefix}…{bound} for {user}. Keep it now, it is not shown again: {key}"
        )
