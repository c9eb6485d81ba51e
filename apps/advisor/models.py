"""Current findings: one row per (container, window) with every report field, written by services.refresh_findings
after each collection, read by pages, CSV and API without recomputing anything but the pod page's explanation, which
selectors.explanation() rebuilds from the stored figures (kilobytes of text per row, rewritten every cycle, made a
1,000-node refresh write 300 MB)."""

from __future__ import annotations

from django.db import models

from apps.clusters.models import Cluster, Container, ContainerChange


class Window(models.TextChoices):
    HOUR = "1h", "last hour"
    DAY = "24h", "last 24 hours"
    WEEK = "7d", "last 7 days"


WINDOW_SECONDS = {Window.HOUR: 3600, Window.DAY: 86400, Window.WEEK: 7 * 86400}


class Finding(models.Model):
    container = models.ForeignKey(Container, on_delete=models.CASCADE, related_name="findings")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="+")
    namespace = models.CharField(max_length=63)
    window = models.CharField(max_length=4, choices=Window.choices)
    computed_at = models.DateTimeField()
    window_start = models.DateTimeField(null=True, help_text="Null for lifetime figures (a single reading).")
    window_end = models.DateTimeField()
    lifetime = models.BooleanField(default=False)

    node_cpus = models.FloatField(null=True)
    shares = models.IntegerField(null=True)
    shares_floor_mcpu = models.IntegerField(null=True)
    quota_ceiling_mcpu = models.IntegerField(null=True)
    period_us = models.IntegerField(null=True)
    usage_avg_mcpu = models.FloatField(null=True)
    usage_p95_mcpu = models.FloatField(null=True)
    usage_max_mcpu = models.FloatField(null=True)
    throttle_ratio = models.FloatField(null=True)
    throttled_seconds_per_second = models.FloatField(null=True)
    pressure_waiting_per_second = models.FloatField(null=True, help_text="CPU pressure (PSI some), s per s.")
    pressure_stalled_per_second = models.FloatField(null=True, help_text="CPU pressure (PSI full), s per s.")
    # Lifetime findings only: the totals that tell whether pressure is measured when no rate is known.
    throttled_seconds_total = models.FloatField(null=True)
    pressure_waiting_seconds_total = models.FloatField(null=True)
    periods = models.BigIntegerField(null=True)
    throttled_periods = models.BigIntegerField(null=True)
    threads = models.IntegerField(null=True)
    samples = models.IntegerField(default=0)
    kernel_version = models.CharField(max_length=200, blank=True)
    kernel_verdict = models.CharField(max_length=16, blank=True)
    kernel_bug = models.CharField(max_length=16, blank=True)

    recommendations = models.JSONField(default=list)
    kinds = models.CharField(
        max_length=200, blank=True, help_text="',kind,kind,' for filtering by recommendation kind."
    )
    severity_rank = models.SmallIntegerField(default=9, help_text="0 critical, 1 warning, 2 info, 9 none.")
    # What the explanation needs beyond the report's figures.
    covered_seconds = models.FloatField(null=True, help_text="Time the window's used samples span.")
    gaps_ignored = models.IntegerField(default=0, help_text="Samples left out for following a gap in collection.")
    usage_active_mcpu = models.FloatField(null=True, help_text="Lifetime figures: CPU per period the container ran.")
    node_total_shares = models.BigIntegerField(
        null=True,
        help_text="cpu.shares of every pod on the node (cgroup v2 with a known mapping: weights at its level).",
    )
    # The node's cgroup facts the floor was computed with (apps/clusters/cgroup_scheme.py).
    cgroup_version = models.SmallIntegerField(null=True)
    pod_throttle_ratio = models.FloatField(null=True, help_text="The pod cgroup's own ratio (a pod-level quota).")
    weight_mapping = models.CharField(max_length=16, blank=True, default="")
    expected_curve = models.JSONField(
        default=list,
        help_text="[[limit mCPU, throttle ratio at most], …] for limits above the current one: the pod page's curve.",
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["container", "window"], name="finding_once_per_window")]
        indexes = [
            models.Index(fields=["cluster", "namespace", "window", "throttle_ratio"], name="finding_ns_ratio"),
            models.Index(fields=["cluster", "window", "throttle_ratio"], name="finding_cluster_ratio"),
        ]

    def __str__(self) -> str:
        return f"{self.container} [{self.window}] ratio={self.throttle_ratio}"


class ChangeAdvice(models.Model):
    """Whether a change of limit or request followed the advice that stood before it: the plan of the container's
    1 h finding computed before the change was seen (a rollout: the earlier pod's container's). Checked once, at the
    first refresh after the change, before that refresh replaces the finding; `kind` is "" when no piece of advice
    matched (or no finding stood before it)."""

    change = models.OneToOneField(ContainerChange, on_delete=models.CASCADE, primary_key=True, related_name="advice")
    kind = models.CharField(max_length=32, blank=True, help_text="The recommendation it followed; empty: none.")
    suggested_mcpu = models.IntegerField(null=True, help_text="The value the advice suggested.")
    expected_throttle_ratio_max = models.FloatField(null=True, help_text="What the advice said the ratio would be.")
    checked_at = models.DateTimeField()
    # Once the change's after-window is complete: its verdict and whether the advice did what it said (the
    # overview's record); "" / None before.
    verdict = models.CharField(max_length=16, blank=True)
    worked = models.BooleanField(null=True)

    def __str__(self) -> str:
        return f"advice {self.change_id}: {self.kind or 'none'}"
