from django.core.management.base import BaseCommand, CommandError

from apps.clusters.models import Cluster
from apps.collector.services import collect_once
from apps.words import printable


class Command(BaseCommand):
    help = "Run one collection cycle for a cluster now, in this process, and print how it went."

    def add_arguments(self, parser):
        parser.add_argument("--cluster", required=True)
        parser.add_argument("--once", action="store_true", help="one cycle (the default; kept for scripts)")
        parser.add_argument("--workers", type=int, default=4, help="nodes read at once")

    def handle(self, *args, cluster: str, workers: int, **options):
        target = Cluster.objects.filter(name=cluster).first()
        if target is None:
            names = ", ".join(Cluster.objects.values_list("name", flat=True)) or "none registered"
            raise CommandError(f"no cluster named {cluster!r} (known: {names})")
        run = collect_once(target, workers=workers)
        self.stdout.write(
            f"{target.name}: {run.get_status_display()} — {run.nodes_ok} node(s) ok, {run.nodes_failed} failed, "
            f"{run.samples_written} sample(s) written in {run.duration_s or 0:.1f} s"
        )
        for result in run.node_results.filter(ok=False):
            self.stdout.write(printable(f"  node {result.node}: {result.error}"))
        # Errors and problems quote what the cluster answered: escaped, as import_dump prints its problems.
        for problem in run.problems.all()[:20]:
            self.stdout.write(printable(f"  {problem.node or 'cluster'}: {problem.message}"))
        if run.status == run.Status.FAILED:
            raise CommandError("the collection failed: see the problems above")
