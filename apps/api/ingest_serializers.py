"""What a node agent may push to POST /api/v1/ingest/: every field bounded and typed, so hostile or broken input is
refused with a message instead of stored."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.validators import RegexValidator
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.collector.push import AgentBatch, AgentNode, AgentPeriodSample, AgentSample
from apps.telemetry.counters import MAX_SANE, consistency_problem

from .serializers import QOS_CLASSES, Iso8601Field

# --- agent ingest ---------------------------------------------------------------------------------------------------

MAX_CONTAINERS_PER_BATCH = 5000  # 110 pods per node by default; a few hundred pods with sidecars still fit
MAX_AGENT_ERRORS = 5000
MAX_CLOCK_SKEW = timedelta(minutes=5)
MAX_COUNTER = int(MAX_SANE)
# Period samples: the agent polls at most 30 s (twice that allows a late last poll), at most 64 containers a cycle.
MAX_PERIOD_SAMPLE_SECONDS = 60
MAX_SAMPLED_CONTAINERS = 64
MIN_PERIOD_US = 1_000  # the kernel's shortest cfs_period_us
MAX_SAMPLE_PERIODS = MAX_PERIOD_SAMPLE_SECONDS * 1_000_000 // MIN_PERIOD_US + 2
MAX_NODE_CPUS = 100_000  # node.capacity_mcpu's bound, for a node that does not state its CPUs


class StrictIntegerField(serializers.IntegerField):
    """A JSON integer only: no strings, booleans or floats (the agent never sends them; coercing hides bugs)."""

    def to_internal_value(self, data: Any) -> int:
        if isinstance(data, bool) or not isinstance(data, int):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictFloatField(serializers.FloatField):
    """A finite JSON number (integer or float) only: no strings, booleans, NaN or infinities."""

    def to_internal_value(self, data: Any) -> float:
        if isinstance(data, bool) or not isinstance(data, int | float):
            self.fail("invalid")
        if isinstance(data, float) and not math.isfinite(data):
            self.fail("invalid")
        return super().to_internal_value(data)


class StrictCharField(serializers.CharField):
    """A JSON string only (DRF's CharField would turn 5 into "5")."""

    def to_internal_value(self, data: Any) -> str:
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)


def _counter(name: str, maximum: int = MAX_COUNTER, minimum: int = 0) -> StrictIntegerField:
    message = f"{name} must be a whole number from {minimum} to {maximum}, or null."
    return StrictIntegerField(
        allow_null=True,
        min_value=minimum,
        max_value=maximum,
        error_messages={"invalid": message, "min_value": message, "max_value": message, "max_string_length": message},
    )


def _seconds(name: str) -> StrictFloatField:
    message = f"{name} must be a finite number of seconds from 0 to 2**53, or null."
    return StrictFloatField(
        allow_null=True,
        min_value=0,
        max_value=MAX_SANE,
        error_messages={"invalid": message, "min_value": message, "max_value": message, "max_string_length": message},
    )


def _text(
    name: str, max_length: int, *, allow_blank: bool = True, pattern: tuple[str, str] | None = None
) -> StrictCharField:
    """A string field; `pattern` is (regex, what the string must be) for the error message."""
    message = f"{name} must be a string of at most {max_length} characters."
    # Validators go in as an argument: DRF re-creates declared fields from their arguments for every serializer.
    validators = [RegexValidator(pattern[0], message=f"{name} must be {pattern[1]}.")] if pattern else []
    return StrictCharField(
        max_length=max_length,
        allow_blank=allow_blank,
        trim_whitespace=False,
        validators=validators,
        error_messages={"invalid": message, "max_length": message, "blank": f"{name} must not be empty."},
    )


@extend_schema_field({"type": "array", "items": {"type": "integer", "minimum": 0}, "maxItems": MAX_SAMPLE_PERIODS})
class ThrottledPeriodsField(serializers.Field):
    """A JSON list of whole microseconds, checked in one plain loop: up to 60,002 entries, where a DRF child field
    per entry would cost milliseconds per sample."""

    def to_internal_value(self, data: Any) -> tuple[int, ...]:
        if not isinstance(data, list):
            raise serializers.ValidationError("period_sample.throttled_us must be a list of whole microseconds.")
        if len(data) > MAX_SAMPLE_PERIODS:
            raise serializers.ValidationError(
                f"period_sample.throttled_us lists {len(data)} periods: at most {MAX_SAMPLE_PERIODS} fit in "
                f"{MAX_PERIOD_SAMPLE_SECONDS} s."
            )
        for index, value in enumerate(data):
            if type(value) is not int or not 0 <= value <= MAX_COUNTER:
                raise serializers.ValidationError(
                    f"period_sample.throttled_us[{index}] = {value!r} is not a whole number of microseconds from 0 "
                    f"to {MAX_COUNTER}."
                )
        return tuple(data)

    def to_representation(self, value: Any) -> list[int]:
        return list(value)


class AgentPeriodSampleSerializer(serializers.Serializer):
    seconds = StrictFloatField(
        min_value=0.001,
        max_value=MAX_PERIOD_SAMPLE_SECONDS,
        error_messages={
            m: f"period_sample.seconds must be a number of seconds from 0.001 to {MAX_PERIOD_SAMPLE_SECONDS}."
            for m in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )
    periods = StrictIntegerField(
        min_value=0,
        max_value=MAX_SAMPLE_PERIODS,
        error_messages={
            m: f"period_sample.periods must be a whole number from 0 to {MAX_SAMPLE_PERIODS}."
            for m in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )
    throttled_us = ThrottledPeriodsField()

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        listed, periods = len(attrs["throttled_us"]), attrs["periods"]
        if listed > periods:
            raise serializers.ValidationError(
                {"throttled_us": [f"period_sample.throttled_us lists {listed} periods but periods is {periods}."]}
            )
        return attrs


class AgentNodeSerializer(serializers.Serializer):
    # DNS subdomain: what Kubernetes allows for node names.
    name = _text(
        "node.name",
        253,
        allow_blank=False,
        pattern=(
            r"\A[a-z0-9]([-a-z0-9.]*[a-z0-9])?\Z",
            "a Kubernetes node name: lowercase letters, digits, '-' and '.'",
        ),
    )
    kernel_version = _text("node.kernel_version", 200)
    capacity_mcpu = _counter("node.capacity_mcpu", maximum=100_000_000, minimum=1)
    cfs_slice_us = _counter("node.cfs_slice_us", maximum=1_000_000, minimum=1)
    cpufreq_governor = _text("node.cpufreq_governor", 32)


class AgentContainerSerializer(serializers.Serializer):
    pod_uid = _text(
        "pod_uid", 64, allow_blank=False, pattern=(r"\A[0-9a-fA-F-]+\Z", "a pod uid (hex digits and dashes)")
    )
    container_id = _text(
        "container_id", 128, pattern=(r"\A[0-9a-f]*\Z", "a runtime container id (hex digits) or empty")
    )
    qos_class = serializers.ChoiceField(
        choices=["", *QOS_CLASSES],
        allow_blank=True,
        error_messages={"invalid_choice": f"qos_class must be one of {', '.join(QOS_CLASSES)} or empty."},
    )
    periods_total = _counter("periods_total")
    throttled_periods_total = _counter("throttled_periods_total")
    throttled_seconds_total = _seconds("throttled_seconds_total")
    usage_seconds_total = _seconds("usage_seconds_total")
    threads = _counter("threads", maximum=4_194_304)  # the kernel's pid_max limit
    quota_us = _counter("quota_us", minimum=1)
    period_us = _counter("period_us", maximum=1_000_000, minimum=1_000)  # the kernel accepts 1 ms to 1 s
    shares = _counter("shares", maximum=262_144, minimum=2)
    weight = _counter("weight", maximum=10_000, minimum=1)
    burst_us = _counter("burst_us")
    bursts_total = _counter("bursts_total")
    burst_seconds_total = _seconds("burst_seconds_total")
    psi_some_total_seconds = _seconds("psi_some_total_seconds")
    psi_full_total_seconds = _seconds("psi_full_total_seconds")
    period_sample = AgentPeriodSampleSerializer(required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        periods, throttled = attrs.get("periods_total"), attrs.get("throttled_periods_total")
        if periods is not None and throttled is not None and (problem := consistency_problem(periods, throttled)):
            raise serializers.ValidationError({"throttled_periods_total": [f"{problem}."]})
        sample, period_us = attrs.get("period_sample"), attrs.get("period_us")
        if sample is not None:
            if period_us is None:
                raise serializers.ValidationError(
                    {"period_sample": ["period_sample needs the container's period_us: periods are what it counts."]}
                )
            # The kernel counts a period when its timer fires: at most one per period of the time polled, and the
            # two partial periods at the ends.
            most = math.floor(sample["seconds"] * 1_000_000 / period_us) + 2
            if sample["periods"] > most:
                raise serializers.ValidationError(
                    {
                        "period_sample": {
                            "periods": [
                                f"period_sample.periods {sample['periods']} is more than {most}, the periods of "
                                f"{period_us} us that {sample['seconds']:g} s can hold."
                            ]
                        }
                    }
                )
        return attrs


class AgentPayloadSerializer(serializers.Serializer):
    """The node agent's push, as documented in agent/cputune_agent.py. Unknown keys are ignored (newer agents)."""

    agent_version = _text("agent_version", 16, allow_blank=False)
    node = AgentNodeSerializer()
    cgroup_version = StrictIntegerField(
        min_value=1,
        max_value=2,
        error_messages={m: "cgroup_version must be 1 or 2." for m in ("invalid", "min_value", "max_value")},
    )
    collected_at = Iso8601Field(
        "collected_at", require_offset=True, help_text="ISO 8601 with a UTC offset, e.g. 2025-05-01T12:00:00.123+00:00."
    )
    containers: serializers.ListSerializer = serializers.ListSerializer(
        child=AgentContainerSerializer(),
        max_length=MAX_CONTAINERS_PER_BATCH,
        error_messages={"max_length": f"containers holds at most {MAX_CONTAINERS_PER_BATCH} cgroups per batch."},
    )
    sampler_cpu_seconds = StrictFloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=MAX_PERIOD_SAMPLE_SECONDS,
        error_messages={
            m: f"sampler_cpu_seconds must be a number of seconds from 0 to {MAX_PERIOD_SAMPLE_SECONDS}, or null."
            for m in ("invalid", "min_value", "max_value", "max_string_length")
        },
    )

    def get_fields(self) -> dict[str, serializers.Field]:
        fields = super().get_fields()
        # Declared here, not as a class attribute: a field named `errors` would shadow Serializer.errors for readers
        # (DRF's metaclass removes declared fields from the class, so only the name clash is avoided).
        fields["errors"] = serializers.ListField(
            child=_text("errors[]", 4096),
            max_length=MAX_AGENT_ERRORS,
            required=False,
            default=list,
            error_messages={"max_length": f"errors holds at most {MAX_AGENT_ERRORS} lines."},
        )
        return fields

    def validate_collected_at(self, value: datetime) -> datetime:
        # A reading from the future would become the series head and turn every later reading into a "duplicate".
        now = timezone.now()
        if value > now + MAX_CLOCK_SKEW:
            raise serializers.ValidationError(
                f"collected_at {value.isoformat()} is in the future (server time {now.isoformat(timespec='seconds')}): "
                "check the node's clock."
            )
        oldest = now - timedelta(days=settings.CPUTUNE_RETENTION_RAW_DAYS)
        if value < oldest:
            raise serializers.ValidationError(
                f"collected_at {value.isoformat()} is older than the {settings.CPUTUNE_RETENTION_RAW_DAYS}-day "
                "retention of raw samples: check the node's clock."
            )
        return value

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        sampled = [(i, c) for i, c in enumerate(attrs["containers"]) if c.get("period_sample") is not None]
        if len(sampled) > MAX_SAMPLED_CONTAINERS:
            raise serializers.ValidationError(
                {"containers": [f"at most {MAX_SAMPLED_CONTAINERS} containers per batch carry a period_sample."]}
            )
        capacity = attrs["node"].get("capacity_mcpu")
        cpus = math.ceil(capacity / 1000) if capacity else MAX_NODE_CPUS
        for index, container in sampled:
            # Throttled time sums over CPUs: in one period it cannot pass the period on every CPU of the node.
            most_us = container["period_us"] * cpus
            figures = container["period_sample"]["throttled_us"]
            worst = max(figures, default=0)
            if worst > most_us:
                raise serializers.ValidationError(
                    {
                        "containers": {
                            str(index): {  # a digit key: the error path reads containers[index]
                                "period_sample": {
                                    "throttled_us": [
                                        f"period_sample.throttled_us[{figures.index(worst)}] = {worst} us is more "
                                        f"than period_us × node CPUs ({container['period_us']} × {cpus} = {most_us} "
                                        "us): no period waits longer than every CPU for all of it."
                                    ]
                                }
                            }
                        }
                    }
                )
        return attrs

    def to_batch(self) -> AgentBatch:
        """The validated payload as the push service's plain values (call after is_valid())."""
        data = self.validated_data
        node = data["node"]
        return AgentBatch(
            node=AgentNode(
                name=node["name"],
                kernel_version=node["kernel_version"],
                capacity_mcpu=node["capacity_mcpu"],
                cfs_slice_us=node["cfs_slice_us"],
                cpufreq_governor=node["cpufreq_governor"],
            ),
            collected_at=data["collected_at"],
            samples=tuple(
                AgentSample(
                    pod_uid=c["pod_uid"].lower(),
                    container_id=c["container_id"],
                    qos_class=c["qos_class"],
                    periods_total=c["periods_total"],
                    throttled_periods_total=c["throttled_periods_total"],
                    throttled_seconds_total=c["throttled_seconds_total"],
                    usage_seconds_total=c["usage_seconds_total"],
                    pressure_waiting_seconds_total=c.get("psi_some_total_seconds"),
                    pressure_stalled_seconds_total=c.get("psi_full_total_seconds"),
                    threads=c["threads"],
                    quota_us=c["quota_us"],
                    period_us=c["period_us"],
                    period_sample=_period_sample(c.get("period_sample")),
                    shares=c.get("shares"),
                    weight=c.get("weight"),
                    burst_us=c.get("burst_us"),
                    bursts_total=c.get("bursts_total"),
                    burst_seconds_total=c.get("burst_seconds_total"),
                )
                for c in data["containers"]
            ),
            errors=tuple(data.get("errors", ())),
            cgroup_version=data["cgroup_version"],
            agent_version=data["agent_version"],
            sampler_cpu_seconds=data.get("sampler_cpu_seconds"),
        )


def _period_sample(data: dict[str, Any] | None) -> AgentPeriodSample | None:
    if data is None:
        return None
    return AgentPeriodSample(seconds=data["seconds"], periods=data["periods"], throttled_us=data["throttled_us"])


class UnmatchedSerializer(serializers.Serializer):
    pod_uid = serializers.CharField()
    container_id = serializers.CharField()
    reason = serializers.CharField()


class PushResultSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    node = serializers.CharField()
    accepted = serializers.IntegerField(help_text="Readings matched to a known container and stored (or duplicates).")
    samples_written = serializers.IntegerField()
    duplicates = serializers.IntegerField(help_text="Readings at or before the container's last stored instant.")
    period_samples_written = serializers.IntegerField(help_text="Period samples of matched containers stored.")
    pod_level = serializers.IntegerField(help_text="Pod-level cgroups in the push.")
    pod_cgroups_written = serializers.IntegerField(
        help_text="Of those, the ones with a CFS quota, of pods on the pushing node: stored as the pods' own series."
    )
    sandboxes = serializers.IntegerField(help_text="Pod sandbox (pause) cgroups: counted, not stored.")
    unknown = UnmatchedSerializer(many=True, help_text="Cgroups that match no known container, with the reason.")
    problems = serializers.ListField(child=serializers.CharField())
