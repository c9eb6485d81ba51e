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
            help="ingest tokens (required): the cluster whose node agents push with this token; "
            "read tokens (optional): the one cluster the token may read",
        )
        parser.add_argument(
            "--namespace",
            action="append",
            default=[],
            dest="namespaces",
            help="read tokens, optional and repeatable: a namespace the token may read (default: all)",
        )
        parser.add_argument(
            "--node",
            default="",
            help="ingest tokens, optional: only this node may push with the token (one token per node)",
        )

    def handle(self, *args, user: str, scope: str, name: str, cluster: str | None, node: str, namespaces, **options):
        try:
            token, key = create_token_for_username(user, scope, name, cluster, node, namespaces)
        except get_user_model().DoesNotExist:
            raise CommandError(
                f"no user named {user!r}: create it first (make run does, or manage.py createsuperuser)"
            ) from None
        except Cluster.DoesNotExist:
            raise CommandError(f"no cluster named {cluster!r}: register it first (manage.py add_cluster)") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        bound = f" {'bound' if scope == ApiToken.Scope.INGEST else 'limited'} to cluster {cluster}" if cluster else ""
        bound += f", node {node}" if node else ""
        bound += f", namespaces {', '.join(namespaces)}" if namespaces else ""
        self.stdout.write(
            f"Created {scope} token {token.prefix}…{bound} for {user}. Keep it now, it is not shown again: {key}"
        )
