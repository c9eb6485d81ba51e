"""The audit trail of collections: one CollectionRun per cycle, one CollectionProblem per thing that went wrong."""

from __future__ import annotations

from django.db import models

from apps.clusters.models import Cluster


class CollectionRun(models.Model):
    class Status(models.TextChoices):
        RUNNING = "running"
        OK = "ok"
        PARTIAL = "partial", "partial (some nodes failed)"
        FAILED = "failed"

    class PodsStatus(models.TextChoices):
        PENDING = "pending"
        STORED = "stored"
        FAILED = "failed"

    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="runs")
    source = models.CharField(max_length=16)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.RUNNING)
    nodes_total = models.PositiveIntegerField(default=0)
    nodes_ok = models.PositiveIntegerField(default=0)
    nodes_failed = models.PositiveIntegerField(default=0)
    samples_written = models.PositiveIntegerField(default=0)
    # "pending" from the moment the nodes are stored (and their reads start) until the pods are: the run stays
    # open. "failed": the pods could not be listed or stored this cycle (the ones stored before were kept).
    pods = models.CharField(max_length=8, choices=PodsStatus.choices, default=PodsStatus.STORED)

    class Meta:
        ordering = ["-started_at"]
        indexes = [models.Index(fields=["cluster", "-started_at"], name="run_latest")]

    def __str__(self) -> str:
        return f"{self.cluster} run {self.started_at:%Y-%m-%d %H:%M:%S} ({self.status})"

    @property
    def duration_s(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class CollectionProblem(models.Model):
    run = models.ForeignKey(CollectionRun, on_delete=models.CASCADE, related_name="problems")
    node = models.CharField(max_length=253, blank=True)
    message = models.TextField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "id"]

    def __str__(self) -> str:
        return f"{self.node or 'cluster'}: {self.message[:80]}"


class NodeResult(models.Model):
    """How reading one node went in one run; (run, node) is unique so a redelivered node task is recognised."""

    run = models.ForeignKey(CollectionRun, on_delete=models.CASCADE, related_name="node_results")
    node = models.CharField(max_length=253)
    ok = models.BooleanField()
    readings = models.PositiveIntegerField(default=0)
    samples_written = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(null=True, blank=True)
    error = models.TextField(blank=True)
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["node"]
        constraints = [models.UniqueConstraint(fields=["run", "node"], name="node_result_once_per_run")]

    def __str__(self) -> str:
        return f"{self.node}: {'ok' if self.ok else self.error[:60]}"
