"""manage.py kernel_probe [--node NAME] [--cluster NAME] [--iterations N]"""

from django.core.management.base import BaseCommand, CommandError

from apps.clusters.models import Cluster
from apps.lab import services
from apps.lab.probe import ProbeError, ProbeResult
from apps.words import plural


class Command(BaseCommand):
    help = (
        "Measure whether this machine's kernel throttles wrongly (the CFS slice-expiry bug): a 5 ms work loop under a "
        "20 ms / 100 ms quota and a fibtest under 50 ms / 100 ms. Prints the figures and a verdict, and stores them "
        "on the node so its page shows the measured evidence beside the version-table verdict."
    )

    def add_arguments(self, parser):
        parser.add_argument("--node", help="the node this machine is (default: the lab's node, else the host name)")
        parser.add_argument("--cluster", help="the cluster of that node (default: lab, or the only cluster)")
        parser.add_argument("--iterations", type=int, default=200, help="work-loop iterations (≈ 0.1 s each)")

    def handle(self, *args, node: str | None, cluster: str | None, iterations: int, **options):
        ok, reason = services.can_run()
        if not ok:
            raise CommandError(f"the probe needs its own cgroup with a quota: {reason}")
        try:
            result, stored_on = services.run_kernel_probe(cluster_name=cluster, node_name=node, iterations=iterations)
        except (ProbeError, Cluster.DoesNotExist) as exc:
            raise CommandError(str(exc)) from None
        for line in summary_lines(result):
            self.stdout.write(line)
        self.stdout.write(f"Stored on node {stored_on.cluster.name}/{stored_on.name}.")


def summary_lines(r: ProbeResult) -> list[str]:
    """What the command prints about a probe run: the machine, each test's figures, the verdict."""
    return [
        f"Kernel {r.kernel_release}, {plural(r.cpus, 'CPU')}, cgroup v{r.cgroup_version}, slice {r.cfs_slice_us} µs",
        f"Work loop (Ivan Babrou's CFS quota bug test): {plural(r.workloop_iterations, 'iteration')} of "
        f"~{r.workloop_target_work_ms:.0f} ms work under {r.workloop_quota_us // 1000} ms / "
        f"{r.workloop_period_us // 1000} ms: wall p50 {r.workloop_wall_p50_ms:.1f} ms, p99 {r.workloop_wall_p99_ms:.1f} "
        f"ms, max {r.workloop_wall_max_ms:.1f} ms; {plural(r.workloop_throttled_iterations, 'iteration')} took "
        f"≥ 50 ms; throttled in {r.workloop_nr_throttled:,} of {plural(r.workloop_nr_periods, 'period')}",
        f"Indeed's fibtest: 1 fast + {plural(r.fibtest_slow_processes, 'slow process', 'slow processes')} under "
        f"{r.fibtest_quota_us // 1000} ms / {r.fibtest_period_us // 1000} ms for {plural(r.fibtest_periods, 'period')}: "
        f"got {r.fibtest_cpu_ms:.0f} ms of CPU of {r.fibtest_expected_cpu_ms:.0f} ms allowed ({r.fibtest_cpu_ratio:.0%})",
        f"Verdict: {r.verdict} — {r.reason}",
    ]
