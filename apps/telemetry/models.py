"""The time series: raw samples (counters as read and the deltas computed at ingest), hourly rollups, series heads,
and the node agent's period samples (one throttled-time figure per CFS period over a few seconds).

On PostgreSQL `telemetry_sample` is a table partitioned by day on `ts` (see migration 0001 and partitions.ensure_partitions):
retention drops whole partitions. On SQLite it is a plain table.
"""

from __future__ import annotations

from django.db import models

from apps.clusters.models import Container


class Sample(models.Model):
    """One container's counters at one instant, with the increase since its previous sample."""

    # (container, ts) is the identity of a sample: re-ingesting the same batch conflicts and is ignored.
    # It also includes the partition key, as PostgreSQL requires of unique constraints on partitioned tables.
    pk = models.CompositePrimaryKey("container_id", "ts")
    # No database FK: samples outlive deleted containers until retention drops their partition.
    container = models.ForeignKey(
        Container, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    ts = models.DateTimeField()

    periods_total = models.BigIntegerField(null=True)
    throttled_periods_total = models.BigIntegerField(null=True)
    throttled_seconds_total = models.FloatField(null=True)
    usage_seconds_total = models.FloatField(null=True)
    pressure_waiting_seconds_total = models.FloatField(null=True, help_text="PSI cpu some total (s).")
    pressure_stalled_seconds_total = models.FloatField(null=True, help_text="PSI cpu full total (s).")
    threads = models.IntegerField(null=True)

    interval_s = models.FloatField(null=True, help_text="Seconds since the previous sample; null for the first.")
    periods_delta = models.BigIntegerField(null=True)
    throttled_periods_delta = models.BigIntegerField(null=True)
    throttled_seconds_delta = models.FloatField(null=True)
    usage_seconds_delta = models.FloatField(null=True)
    pressure_waiting_seconds_delta = models.FloatField(null=True)
    pressure_stalled_seconds_delta = models.FloatField(null=True)
    reset = models.BooleanField(default=False, help_text="A counter went backwards: a new container or a restart.")

    class Meta:
        # On PostgreSQL migration 0001 creates this table partitioned by day, and the ts index as BRIN.
        indexes = [models.Index(fields=["ts"], name="sample_ts")]

    def __str__(self) -> str:
        return f"sample {self.container_id} @ {self.ts.isoformat()}"


class HourlyRollup(models.Model):
    """Sums of one container's deltas over one hour, for windows longer than the raw retention reads cheaply."""

    container = models.ForeignKey(
        Container, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    hour = models.DateTimeField()
    samples = models.IntegerField()
    covered_seconds = models.FloatField()
    periods = models.BigIntegerField(null=True)
    throttled_periods = models.BigIntegerField(null=True)
    throttled_seconds = models.FloatField(null=True)
    usage_seconds = models.FloatField(null=True)
    pressure_waiting_seconds = models.FloatField(null=True)
    pressure_stalled_seconds = models.FloatField(null=True)
    usage_p95_mcpu = models.FloatField(null=True)
    usage_max_mcpu = models.FloatField(null=True)
    threads_max = models.IntegerField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["container", "hour"], name="rollup_unique_hour")]
        indexes = [models.Index(fields=["hour"], name="rollup_hour")]

    def __str__(self) -> str:
        return f"rollup {self.container_id} @ {self.hour.isoformat()}"


class SeriesHead(models.Model):
    """The last stored reading of each container: what the next reading's deltas are computed against."""

    container = models.OneToOneField(Container, on_delete=models.CASCADE, primary_key=True, related_name="head")
    ts = models.DateTimeField()
    periods_total = models.BigIntegerField(null=True)
    throttled_periods_total = models.BigIntegerField(null=True)
    throttled_seconds_total = models.FloatField(null=True)
    usage_seconds_total = models.FloatField(null=True)
    pressure_waiting_seconds_total = models.FloatField(null=True)
    pressure_stalled_seconds_total = models.FloatField(null=True)

    def __str__(self) -> str:
        return f"head {self.container_id} @ {self.ts.isoformat()}"


class BurstReading(models.Model):
    """A container's CFS burst setting and counters as the node agent last read them (Linux ≥ 5.14 has the setting,
    ≥ 5.16 the counters): what the explanation of its ceiling shows. Totals are since the container started."""

    container = models.OneToOneField(Container, on_delete=models.CASCADE, primary_key=True, related_name="burst")
    ts = models.DateTimeField()
    burst_us = models.BigIntegerField(null=True, help_text="cpu.cfs_burst_us / cpu.max.burst; 0 = no burst.")
    bursts_total = models.BigIntegerField(null=True, help_text="nr_bursts: periods that used burst.")
    burst_seconds_total = models.FloatField(null=True, help_text="burst_time: CPU time run beyond the quota (s).")

    def __str__(self) -> str:
        return f"burst {self.container_id} @ {self.ts.isoformat()}"


class PeriodSample(models.Model):
    """A few seconds of one container polled period by period (the node agent's sampler, right after the collection
    at `collected_at`): how many periods were counted and the throttled time of each period that had some."""

    container = models.ForeignKey(
        Container, on_delete=models.DO_NOTHING, db_constraint=False, db_index=False, related_name="+"
    )
    collected_at = models.DateTimeField()
    seconds = models.FloatField()
    periods = models.IntegerField()
    # The quota and period in force while sampled: a figure only says what a limit adds against the quota it had.
    period_us = models.IntegerField()
    quota_us = models.BigIntegerField(null=True)
    throttled_us = models.JSONField(help_text="Throttled µs of each period that had some; the other periods had none.")

    class Meta:
        # Re-pushing a batch stores its samples once; the (container, instant) index also serves the advisor's reads.
        constraints = [
            models.UniqueConstraint(fields=["container", "collected_at"], name="period_sample_unique_instant")
        ]
        indexes = [models.Index(fields=["collected_at"], name="period_sample_collected_at")]

    def __str__(self) -> str:
        return f"period sample {self.container_id} @ {self.collected_at.isoformat()}"
