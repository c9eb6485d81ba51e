"""manage.py kernel_probe [--node NAME] [--cluster NAME] [--iterations N]"""

from django.core.management.base import BaseCommand, CommandError

from apps.clusters.models import Cluster
from apps.lab import services
from apps.lab.probe import ProbeError


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
        r = result
        self.stdout.write(
            f"Kernel {r.kernel_release}, {r.cpus} CPUs, cgroup v{r.cgroup_version}, slice {r.cfs_slice_us} µs"
        )
        self.stdout.write(
            f"Work loop (seed 004): {r.workloop_iterations} iterations of ~{r.workloop_target_work_ms:.0f} ms work under "
            f"{r.workloop_quota_us // 1000} ms / {r.workloop_period_us // 1000} ms: wall p50 {r.workloop_wall_p50_ms:.1f} ms, "
            f"p99 {r.workloop_wall_p99_ms:.1f} ms, max {r.workloop_wall_max_ms:.1f} ms; "
            f"{r.workloop_throttled_iterations} iteration(s) took ≥ 50 ms; throttled in {r.workloop_nr_throttled} of "
            f"{r.workloop_nr_periods} periods"
        )
        self.stdout.write(
            f"fibtest (seed 000): 1 fast + {r.fibtest_slow_processes} slow processes under {r.fibtest_quota_us // 1000} ms / "
            f"{r.fibtest_period_us // 1000} ms for {r.fibtest_periods} periods: got {r.fibtest_cpu_ms:.0f} ms of CPU of "
            f"{r.fibtest_expected_cpu_ms:.0f} ms allowed ({r.fibtest_cpu_ratio:.0%})"
        )
        self.stdout.write(f"Verdict: {r.verdict} — {r.reason}")
        self.stdout.write(f"Stored on node {stored_on.cluster.name}/{stored_on.name}.")
