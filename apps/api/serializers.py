"""API serializers. Every field is listed explicitly; report and recommendation rows keep the contract's names and order
(docs/contract.md), which tests/api check against the contract text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from django.utils import timezone
from django.utils.dateparse import parse_datetime
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from apps.advisor.change_effect import VERDICTS as CHANGE_VERDICTS
from apps.advisor.kernel import is_kernel_release, kernel_verdict
from apps.advisor.models import Window
from apps.advisor.pressure import PRESSURE_STATUSES
from apps.advisor.runtimes import RUNTIMES
from apps.advisor.vocabulary import BUGS, CONFIDENCES, RECOMMENDATION_KINDS, SEVERITIES, VERDICTS
from apps.clusters.models import CHANGE_KINDS, Cluster, Node

QOS_CLASSES = ("Guaranteed", "Burstable", "BestEffort")


# --- output fields --------------------------------------------------------------------------------------------------


@extend_schema_field(OpenApiTypes.NUMBER)
class NumberField(serializers.Field):
    """A number passed through as the selector made it (an int stays an int); rounded when `digits` is given."""

    def __init__(self, digits: int | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)
        self.digits = digits

    def to_representation(self, value: Any) -> Any:
        if value is None:
            return None
        return round(value, self.digits) if self.digits is not None else value


@extend_schema_field({"type": "string", "nullable": True})
class BlankAsNullCharField(serializers.Field):
    """A text the source may not report: "" (unknown) is shown as null."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("read_only", True)
        super().__init__(**kwargs)

    def to_representation(self, value: Any) -> str | None:
        return value or None


def _choice(choices: tuple[str, ...], **kwargs: Any) -> serializers.ChoiceField:
    return serializers.ChoiceField(choices=list(choices), **kwargs)


# --- clusters and nodes ---------------------------------------------------------------------------------------------


class ClusterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = ["name", "source", "enabled", "created_at"]


class KernelVerdictSerializer(serializers.Serializer):
    version = serializers.CharField(help_text="The kernel release as given (cut to 80 characters).")
    verdict = _choice(VERDICTS)
    bug = _choice(BUGS, allow_null=True, help_text="Which CFS bandwidth bug an affected kernel has.")
    fixed_in = serializers.ListField(
        child=serializers.CharField(), help_text="Versions or vendor builds to move to; empty when fixed."
    )
    confidence = _choice(CONFIDENCES)
    reasons = serializers.ListField(child=serializers.CharField(), help_text="The evidence, naming the commits.")


class NodeSerializer(serializers.ModelSerializer):
    cpus = NumberField(help_text="CPUs from capacity (else allocatable); null when unknown.")
    kernel_version = BlankAsNullCharField()
    kernel = serializers.SerializerMethodField(help_text="Whether this kernel has the CFS slice expiry fix.")
    cpu_manager_policy = BlankAsNullCharField(help_text="static or none; null when the kubelet config was not read.")
    cpufreq_governor = BlankAsNullCharField()
    os_image = BlankAsNullCharField()
    container_runtime = BlankAsNullCharField()
    kubelet_version = BlankAsNullCharField()
    pods = serializers.IntegerField(
        source="pod_count", help_text="Pods last seen on this node (that the caller may read)."
    )
    probe = serializers.JSONField(allow_null=True, help_text="The last kernel probe's measured result.")
    weight_mapping = BlankAsNullCharField(
        help_text="cgroup v2 shares→weight mapping seen on the node: linear | quadratic; null when not known."
    )
    cgroup_evidence = BlankAsNullCharField(help_text="What the cgroup version and mapping were judged from.")

    class Meta:
        model = Node
        fields = [
            "name",
            "cpus",
            "capacity_mcpu",
            "allocatable_mcpu",
            "kernel_version",
            "kernel",
            "cpu_manager_policy",
            "cfs_slice_us",
            "cpufreq_governor",
            "os_image",
            "container_runtime",
            "kubelet_version",
            "has_cfs_counters",
            "cgroup_version",
            "weight_mapping",
            "cgroup_evidence",
            "pods",
            "probe",
            "probe_at",
            "last_seen",
        ]

    @extend_schema_field(KernelVerdictSerializer)
    def get_kernel(self, node: Node) -> dict[str, Any]:
        return KernelVerdictSerializer(kernel_verdict(node.kernel_version)).data


class NamespaceRowSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    pods = serializers.IntegerField()
    containers = serializers.IntegerField()
    containers_over_target = serializers.IntegerField(help_text="Containers throttled above the target in the window.")
    containers_with_recommendations = serializers.IntegerField()
    worst_throttle_ratio = NumberField(allow_null=True, help_text="0-1; null when no ratio is known.")
    throttle_target = NumberField(help_text="The throttle ratio above which a container counts as throttled (0-1).")
    window = _choice(tuple(Window.values))


# --- report rows ----------------------------------------------------------------------------------------------------


class RecommendationSerializer(serializers.Serializer):
    kind = _choice(RECOMMENDATION_KINDS)
    severity = _choice(SEVERITIES)
    summary = serializers.CharField()
    detail = serializers.CharField()
    suggested_request_mcpu = serializers.IntegerField(allow_null=True)
    suggested_limit_mcpu = serializers.IntegerField(allow_null=True)
    expected_throttle_ratio_max = NumberField(
        allow_null=True,
        help_text="0-1: the throttle ratio the change should leave at most; null where no claim is made.",
    )
    expected_basis = serializers.CharField(
        allow_null=True, help_text="What the expected effect rests on, in one line (docs/domain.md#expected-effect)."
    )
    suggested_pod_limit_mcpu = serializers.IntegerField(
        allow_null=True, help_text="raise_pod_limit: the pod's limit to set (not the container's); null otherwise."
    )


class ReportRowSerializer(serializers.Serializer):
    """A report row (advisor.selectors.report_row): CPU in millicores, ratios 0-1, times in seconds; unknown = null."""

    cluster = serializers.CharField()
    namespace = serializers.CharField()
    pod = serializers.CharField()
    container = serializers.CharField()
    node = serializers.CharField(allow_null=True)
    workload_kind = serializers.CharField(allow_null=True)
    workload_name = serializers.CharField(allow_null=True)
    qos_class = _choice(QOS_CLASSES, allow_null=True)
    request_mcpu = serializers.IntegerField(allow_null=True)
    limit_mcpu = serializers.IntegerField(allow_null=True)
    node_cpus = NumberField(allow_null=True)
    shares = serializers.IntegerField(allow_null=True)
    shares_floor_mcpu = serializers.IntegerField(allow_null=True)
    quota_ceiling_mcpu = serializers.IntegerField(allow_null=True)
    period_us = serializers.IntegerField(allow_null=True)
    usage_avg_mcpu = NumberField(allow_null=True)
    usage_p95_mcpu = NumberField(allow_null=True)
    throttle_ratio = NumberField(allow_null=True)
    throttled_seconds_per_second = NumberField(allow_null=True)
    periods = serializers.IntegerField(allow_null=True)
    throttled_periods = serializers.IntegerField(allow_null=True)
    threads = serializers.IntegerField(allow_null=True)
    kernel_version = serializers.CharField(allow_null=True)
    kernel_verdict = _choice(VERDICTS, allow_null=True)
    window_start = serializers.DateTimeField(allow_null=True, help_text="Null for lifetime figures (one reading).")
    window_end = serializers.DateTimeField()
    recommendations = RecommendationSerializer(many=True)
    pressure_waiting_per_second = NumberField(
        allow_null=True,
        help_text="CPU pressure (PSI some): share of the time some task of the container waited for CPU, 0-1; null "
        "unless pressure_status is measured.",
    )
    pressure_stalled_per_second = NumberField(
        allow_null=True, help_text="CPU pressure (PSI full): share of the time all its tasks waited, 0-1."
    )
    pressure_status = _choice(
        PRESSURE_STATUSES,
        help_text="measured; not_exported (the source has no pressure series); not_measured (pressure reads 0 while "
        "the container was throttled: PSI is off on the node).",
    )
    cpu_pressure_waiting_seconds_per_second = NumberField(
        allow_null=True, help_text="The same figure as pressure_waiting_per_second, under the contract's planned name."
    )
    cpu_pressure_stalled_seconds_per_second = NumberField(
        allow_null=True, help_text="The same figure as pressure_stalled_per_second, under the contract's planned name."
    )
    pod_limit_mcpu = serializers.IntegerField(
        allow_null=True, help_text="The pod-level CPU limit (spec.resources.limits.cpu); null when the pod sets none."
    )
    image = serializers.CharField(
        allow_null=True, help_text="The container's image as its spec writes it; null: unknown."
    )
    runtime = serializers.ChoiceField(
        choices=RUNTIMES,
        help_text="The runtime the image or the spec's CPU env vars suggest (a guess), or unknown.",
    )
    pod_throttle_ratio = NumberField(
        allow_null=True,
        help_text="The pod cgroup's own throttle ratio in the window (a pod-level quota, 0-1); null when none is stored.",
    )


class RecommendationRowSerializer(serializers.Serializer):
    """One (container, recommendation) row: the recommendations CSV's columns, in its order."""

    cluster = serializers.CharField()
    namespace = serializers.CharField()
    workload_kind = serializers.CharField(allow_null=True)
    workload_name = serializers.CharField(allow_null=True)
    pod = serializers.CharField()
    container = serializers.CharField()
    node = serializers.CharField(allow_null=True)
    kind = _choice(RECOMMENDATION_KINDS)
    severity = _choice(SEVERITIES)
    summary = serializers.CharField()
    throttle_ratio = NumberField(allow_null=True)
    usage_p95_mcpu = NumberField(allow_null=True)
    request_mcpu = serializers.IntegerField(allow_null=True)
    limit_mcpu = serializers.IntegerField(allow_null=True)
    suggested_request_mcpu = serializers.IntegerField(allow_null=True)
    suggested_limit_mcpu = serializers.IntegerField(allow_null=True)
    kernel_verdict = _choice(VERDICTS, allow_null=True)
    window_start = serializers.DateTimeField(allow_null=True, help_text="Null for lifetime figures (one reading).")
    window_end = serializers.DateTimeField()
    computed_at = serializers.DateTimeField(help_text="When cputune computed the finding behind this row.")
    periods = serializers.IntegerField(allow_null=True, help_text="CFS periods the throttle ratio is taken over.")
    kubectl_command = serializers.CharField(
        allow_null=True,
        help_text="`kubectl set resources` line that applies the suggested request and/or limit on the pod's owner; "
        "null when the recommendation suggests neither.",
    )
    expected_throttle_ratio_max = NumberField(
        allow_null=True,
        help_text="0-1: the throttle ratio the change should leave at most; null where no claim is made.",
    )
    expected_basis = serializers.CharField(allow_null=True, help_text="What the expected effect rests on, in one line.")
    pressure_waiting_per_second = NumberField(
        allow_null=True, help_text="The container's CPU pressure (PSI some, 0-1) as in the report row."
    )
    pressure_status = _choice(PRESSURE_STATUSES, help_text="As in the report row.")
    suggested_pod_limit_mcpu = serializers.IntegerField(
        allow_null=True, help_text="raise_pod_limit: the pod's limit to set (not the container's); null otherwise."
    )


# --- series ---------------------------------------------------------------------------------------------------------


class SeriesPointSerializer(serializers.Serializer):
    ts = serializers.DateTimeField(help_text="End of the interval (raw) or start of the hour (hourly).")
    usage_mcpu = NumberField(digits=1, allow_null=True, help_text="Average usage over the interval or hour.")
    usage_p95_mcpu = NumberField(digits=1, allow_null=True, help_text="Hourly points only: the hour's p95.")
    throttle_ratio = NumberField(digits=4, allow_null=True)
    throttled_seconds_per_second = NumberField(digits=4, allow_null=True)
    periods = serializers.IntegerField(allow_null=True)
    throttled_periods = serializers.IntegerField(allow_null=True)
    threads = serializers.IntegerField(allow_null=True)
    pressure_waiting_per_second = NumberField(
        digits=4, allow_null=True, help_text="CPU pressure (PSI some) in the interval or hour; null where not reported."
    )
    pressure_stalled_per_second = NumberField(digits=4, allow_null=True, help_text="CPU pressure (PSI full).")


class ContainerSeriesSerializer(serializers.Serializer):
    container = serializers.CharField()
    request_mcpu = serializers.IntegerField(allow_null=True)
    limit_mcpu = serializers.IntegerField(allow_null=True)
    shares_floor_mcpu = serializers.IntegerField(
        allow_null=True, help_text="CPU the container gets when every neighbour is busy (last-hour finding)."
    )
    quota_ceiling_mcpu = serializers.IntegerField(allow_null=True, help_text="CPU the CFS quota allows at most.")
    points = SeriesPointSerializer(many=True)


class PodSeriesSerializer(serializers.Serializer):
    cluster = serializers.CharField()
    namespace = serializers.CharField()
    pod = serializers.CharField()
    since = serializers.DateTimeField()
    until = serializers.DateTimeField()
    resolution = _choice(("raw", "hourly"), help_text="raw up to 48 hours (one point per collection), else hourly.")
    containers = ContainerSeriesSerializer(many=True)


# --- query parameters -----------------------------------------------------------------------------------------------


def window_field() -> serializers.ChoiceField:
    return serializers.ChoiceField(
        choices=Window.choices,
        default=Window.HOUR,
        help_text="The window the figures cover, ending now.",
        error_messages={"invalid_choice": f"window must be one of {', '.join(Window.values)}, not '{{input}}'."},
    )


class WindowQuerySerializer(serializers.Serializer):
    window = window_field()


SUMMARY_LIMIT_MAX = 50


class SummaryQuerySerializer(serializers.Serializer):
    window = window_field()
    limit = serializers.IntegerField(
        default=5,
        min_value=1,
        max_value=SUMMARY_LIMIT_MAX,
        help_text="How many containers to list, each with all its recommendations: those over the target first "
        "(worst first), then those not over it that have recommendations.",
        error_messages={
            "invalid": f"limit must be a whole number from 1 to {SUMMARY_LIMIT_MAX}.",
            "min_value": f"limit must be a whole number from 1 to {SUMMARY_LIMIT_MAX}.",
            "max_value": f"limit must be a whole number from 1 to {SUMMARY_LIMIT_MAX}.",
        },
    )


SERIES_MAX_RANGE = timedelta(days=31)
SERIES_DEFAULT_RANGE = timedelta(hours=1)
_DATETIME_ERROR = "{name} must be an ISO 8601 date and time, e.g. 2025-05-01T12:00:00Z, not '{value}'."


@extend_schema_field(OpenApiTypes.DATETIME)
class Iso8601Field(serializers.Field):
    """An ISO 8601 instant from a query string or JSON; a time without an offset is read as UTC."""

    def __init__(self, name: str, require_offset: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.parameter = name
        self.require_offset = require_offset

    def to_internal_value(self, data: Any) -> datetime:
        shown = str(data)[:64]
        if not isinstance(data, str) or len(data) > 64:
            raise serializers.ValidationError(_DATETIME_ERROR.format(name=self.parameter, value=shown))
        try:
            value = parse_datetime(data.strip())
        except ValueError:  # well formed but impossible, e.g. month 13
            value = None
        if value is None:
            raise serializers.ValidationError(_DATETIME_ERROR.format(name=self.parameter, value=shown))
        if value.tzinfo is None:
            if self.require_offset:
                raise serializers.ValidationError(
                    f"{self.parameter} must include a UTC offset (e.g. +00:00 or Z), not '{shown}'."
                )
            value = value.replace(tzinfo=UTC)
        if not 1970 <= value.year <= 9000:
            raise serializers.ValidationError(f"{self.parameter} must lie between the years 1970 and 9000.")
        # As UTC: ISO 8601 allows offsets up to ±23:59, PostgreSQL only up to ±15:59 (a 500 before this).
        return value.astimezone(UTC)

    def to_representation(self, value: datetime) -> str:
        return value.isoformat()


class SeriesQuerySerializer(serializers.Serializer):
    since = Iso8601Field(
        "since",
        required=False,
        help_text=f"Start (ISO 8601); default: an hour before until. At most {SERIES_MAX_RANGE.days} days before until "
        "(a 400 beyond).",
    )
    until = Iso8601Field("until", required=False, help_text="End (ISO 8601); default: now.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        until = attrs.get("until") or timezone.now()
        since = attrs.get("since") or until - SERIES_DEFAULT_RANGE
        if since >= until:
            raise serializers.ValidationError({"since": ["since must be before until."]})
        if until - since > SERIES_MAX_RANGE:
            raise serializers.ValidationError(
                {"since": [f"since and until must be at most {SERIES_MAX_RANGE.days} days apart."]}
            )
        return {"since": since, "until": until}


CHANGES_DEFAULT_RANGE = timedelta(days=7)


class ChangesQuerySerializer(serializers.Serializer):
    since = Iso8601Field(
        "since",
        required=False,
        help_text=f"Changes seen from this instant on (ISO 8601); default: {CHANGES_DEFAULT_RANGE.days} days ago. At "
        f"most {SERIES_MAX_RANGE.days} days ago (a 400 beyond).",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        now = timezone.now()
        since = attrs.get("since") or now - CHANGES_DEFAULT_RANGE
        if now - since > SERIES_MAX_RANGE:
            raise serializers.ValidationError({"since": [f"since must be at most {SERIES_MAX_RANGE.days} days ago."]})
        return {"since": since}


class AlsoChangedSerializer(serializers.Serializer):
    kind = _choice(CHANGE_KINDS)
    before = serializers.CharField(allow_null=True)
    after = serializers.CharField(allow_null=True)


class ChangeRowSerializer(serializers.Serializer):
    """A change the inventory saw on a container and what it did (advisor.changes.change_rows): CPU in millicores,
    ratios 0-1, times in seconds; unknown = null."""

    cluster = serializers.CharField()
    namespace = serializers.CharField()
    workload_kind = serializers.CharField(allow_null=True)
    workload_name = serializers.CharField(allow_null=True)
    pod = serializers.CharField()
    container = serializers.CharField()
    kind = _choice(CHANGE_KINDS, help_text="limit, request, image, restart, node, kernel, threads or env.")
    before = serializers.CharField(allow_null=True, help_text="The value before (millicores for limit and request).")
    after = serializers.CharField(allow_null=True, help_text="The value after; null: none (a limit dropped).")
    seen_at = serializers.DateTimeField(help_text="The inventory that saw it: it happened at most one cycle before.")
    rollout_from_pod = serializers.CharField(
        allow_null=True, help_text="A rollout: the workload's earlier pod whose container is the before-window."
    )
    verdict = _choice(CHANGE_VERDICTS, help_text="improved, worse, no_clear_change, too_early or no_data.")
    window_seconds = NumberField(help_text="The length of each window.")
    before_throttle_ratio = NumberField(allow_null=True)
    after_throttle_ratio = NumberField(allow_null=True)
    before_throttled_seconds_per_second = NumberField(allow_null=True)
    after_throttled_seconds_per_second = NumberField(allow_null=True)
    before_usage_p95_mcpu = NumberField(allow_null=True)
    after_usage_p95_mcpu = NumberField(allow_null=True)
    before_pressure_waiting_per_second = NumberField(allow_null=True)
    after_pressure_waiting_per_second = NumberField(allow_null=True)
    before_periods = serializers.IntegerField(allow_null=True)
    after_periods = serializers.IntegerField(allow_null=True)
    p_value = NumberField(allow_null=True, help_text="Mann-Whitney U on the per-sample throttle ratios, two-sided.")
    note = serializers.CharField(help_text="What the verdict rests on, in one line.")
    followed_advice = serializers.CharField(
        allow_null=True,
        help_text="The recommendation kind the change carried out (within a step); null: none or not checked.",
    )
    expected_throttle_ratio_max = NumberField(allow_null=True, help_text="What that advice said the ratio would be.")
    advice_worked = serializers.BooleanField(
        allow_null=True, help_text="Improved, and at or under the expected ratio; null until the verdict is in."
    )
    change_id = serializers.IntegerField(help_text="The change's id: the same change keeps it from call to call.")
    pods = serializers.IntegerField(help_text="Pods the change covers: more than 1 for a rollout over a workload.")
    also_changed = AlsoChangedSerializer(
        many=True,
        help_text="The other values the same container changed at once (a resize's request beside its limit).",
    )
    seen_until = serializers.DateTimeField(
        help_text="When the change's last pod was seen (a rollout over several collections); else seen_at."
    )


class KernelCheckQuerySerializer(serializers.Serializer):
    version = serializers.CharField(
        help_text="A node's kernel release as `uname -r` prints it (status.nodeInfo.kernelVersion), starting with "
        "MAJOR.MINOR; a release without a known verdict is answered `unknown`, a string that is no release is a 400.",
        error_messages={
            "required": "version is required: give a kernel release as `uname -r` prints it, e.g. 5.4.0-1018-gke.",
            "blank": "version is empty: give a kernel release as `uname -r` prints it, e.g. 5.4.0-1018-gke.",
        },
    )

    def validate_version(self, value: str) -> str:
        if not is_kernel_release(value):
            raise serializers.ValidationError(
                f"version is not a kernel release: give one as `uname -r` prints it, MAJOR.MINOR first "
                f"(e.g. 5.4.0-1018-gke), not {value[:40]!r}."
            )
        return value


# --- slack summary (for the schema: the view builds the dict) -------------------------------------------------------


class SlackTextSerializer(serializers.Serializer):
    type = serializers.CharField()
    text = serializers.CharField()


class SlackBlockSerializer(serializers.Serializer):
    type = _choice(("header", "section", "context"))
    text = SlackTextSerializer(required=False)
    elements = SlackTextSerializer(many=True, required=False)


class SlackMessageSerializer(serializers.Serializer):
    text = serializers.CharField(help_text="Notification fallback text.")
    blocks = SlackBlockSerializer(many=True)


# --- namespace summary as JSON (?format=json) -----------------------------------------------------------------------


class SummaryCoverageSerializer(serializers.Serializer):
    computed = serializers.BooleanField(help_text="False until the window's first refresh with data: no figure yet.")
    lifetime_only = serializers.BooleanField(
        help_text="Every figure is a lifetime one (one reading: counters since each container started)."
    )
    covered_minutes = serializers.IntegerField(help_text="The longest span any container's data covers in the window.")
    window_minutes = serializers.IntegerField()
    computed_at = serializers.DateTimeField(allow_null=True)
    next_refresh_at = serializers.DateTimeField(allow_null=True)
    containers = serializers.IntegerField(help_text="Containers with a finding for the window.")
    measured = serializers.IntegerField(help_text="Of which with a throttle ratio or a usage figure.")
    lifetime = serializers.IntegerField(help_text="Of which with lifetime figures only.")

    def get_fields(self) -> dict[str, serializers.Field]:
        # `partial` added here, after `computed`: as a class attribute it would clash with Serializer.partial.
        fields = super().get_fields()
        partial = serializers.BooleanField(help_text="The data spans less than 90% of the window.")
        ordered = {}
        for name, field in fields.items():
            ordered[name] = field
            if name == "computed":
                ordered["partial"] = partial
        return ordered


class SummaryContainerSerializer(serializers.Serializer):
    pod = serializers.CharField()
    container = serializers.CharField()
    over_target = serializers.BooleanField(help_text="Throttled above the target; false: listed for its advice.")
    throttle_ratio = NumberField(allow_null=True, help_text="0-1; null when unknown.")
    lifetime = serializers.BooleanField(help_text="The ratio counts since the container started, not the window.")
    window_start = serializers.DateTimeField(allow_null=True, help_text="Null for lifetime figures (one reading).")
    window_end = serializers.DateTimeField()
    recommendations = RecommendationSerializer(many=True)


class NamespaceSummarySerializer(serializers.Serializer):
    """?format=json: the facts the chat messages state, structured."""

    cluster = serializers.CharField()
    namespace = serializers.CharField()
    window = _choice(tuple(Window.values))
    throttle_target = NumberField(help_text="The throttle ratio above which a container counts as throttled (0-1).")
    headline = serializers.CharField(help_text="The sentence the text message starts with.")
    coverage = SummaryCoverageSerializer()
    containers_checked = serializers.IntegerField()
    containers_over_target = serializers.IntegerField()
    containers_advised_below_target = serializers.IntegerField(
        help_text="Containers not over the target that have recommendations."
    )
    containers = SummaryContainerSerializer(
        many=True, help_text="Over the target first (worst first), then the others with advice; at most `limit`."
    )
    more_over_target = serializers.IntegerField(help_text="Containers over the target that `limit` left out.")
    more_advised_below_target = serializers.IntegerField(help_text="Advised containers that `limit` left out.")
    report_url = serializers.URLField(help_text="The namespace report for the window.")
    changes = ChangeRowSerializer(
        many=True, help_text="Changes seen in the last 24 hours with their effect, newest first."
    )
