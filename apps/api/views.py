"""The REST API: thin, versioned adapters. Each view parses its input, calls one selector or service, serializes.

Errors are JSON whatever the negotiated format (a bot asking for text still gets a parseable 400/404).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cached_property
from typing import Any
from urllib.parse import quote, urlencode

from django.conf import settings
from django.http import HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema, extend_schema_view
from prometheus_client.exposition import choose_encoder
from rest_framework import generics, mixins, viewsets
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.permissions import BasePermission
from rest_framework.renderers import BaseRenderer, JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from apps.advisor.changes import CHANGE_FIELDS, change_rows, change_rows_streamed, changes_of
from apps.advisor.export import changes_csv_filename, recommendations_csv_filename, stream_csv
from apps.advisor.kernel import kernel_verdict
from apps.advisor.models import Finding
from apps.advisor.selectors import RECOMMENDATION_FIELDS, findings, report_row
from apps.clusters.models import Cluster, ContainerChange, Node, Pod
from apps.clusters.visibility import Visibility, for_user
from apps.collector.push import PushForbidden, PushRejected, ingest_agent_batch

from . import chatops, selectors
from .filters import ContainerFilter, RecommendationFilter, SelectorFilterBackend
from .ingest_serializers import AgentPayloadSerializer, PushResultSerializer
from .metrics import CputuneCollector
from .models import ApiToken
from .pagination import Pagination
from .parsers import BoundedJSONParser
from .permissions import CanIngest, CanRead
from .renderers import (
    CSVRenderer,
    FirstRendererNegotiation,
    FormatFirstNegotiation,
    MarkdownRenderer,
    PlainTextRenderer,
    SlackRenderer,
)
from .schema import ApiSchema, IngestSchema
from .serializers import (
    ChangeRowSerializer,
    ChangesQuerySerializer,
    ClusterSerializer,
    KernelCheckQuerySerializer,
    KernelVerdictSerializer,
    NamespaceRowSerializer,
    NamespaceSummarySerializer,
    NodeSerializer,
    PodSeriesSerializer,
    RecommendationRowSerializer,
    ReportRowSerializer,
    SeriesQuerySerializer,
    SlackMessageSerializer,
    SummaryQuerySerializer,
    WindowQuerySerializer,
)
from .services import token_visibility
from .throttles import NodePushThrottle


class ApiView(generics.GenericAPIView):
    """What every cputune endpoint shares: the error-documenting schema, read permission, JSON, JSON errors."""

    schema: Any = ApiSchema()
    permission_classes: Sequence[type[BasePermission]] = [CanRead]
    renderer_classes: Sequence[type[BaseRenderer]] = [JSONRenderer]
    content_negotiation_class: type[BaseContentNegotiation] = FormatFirstNegotiation

    def handle_exception(self, exc: Exception) -> Response:
        response = super().handle_exception(exc)
        self.request.accepted_renderer = JSONRenderer()
        self.request.accepted_media_type = JSONRenderer.media_type
        return response

    @cached_property
    def visibility(self) -> Visibility:
        """What this token (or dashboard user) may read; outside it, every lookup answers as if nothing were there."""
        if isinstance(self.request.auth, ApiToken):
            return token_visibility(self.request.auth)
        return for_user(self.request.user)

    # --- path lookups: 404 with a message naming what was not found (or not in the viewer's scope) ---

    def _path(self, name: str) -> str | None:
        """A path parameter, or None when no stored name can be it (a NUL byte, which PostgreSQL refuses to compare)."""
        value: str = self.kwargs[name]
        return None if "\x00" in value else value

    def get_cluster(self) -> Cluster:
        name = self._path("cluster")
        cluster = selectors.cluster_named(name) if name is not None else None
        if cluster is None or not self.visibility.sees_cluster(cluster.pk):
            raise NotFound(f"no cluster named {self.kwargs['cluster']!r}")
        return cluster

    def get_namespace(self) -> tuple[Cluster, str]:
        cluster = self.get_cluster()
        namespace = self._path("namespace")
        if (
            namespace is None
            or not self.visibility.sees_namespace(cluster.pk, namespace)
            or not selectors.namespace_exists(cluster, namespace)
        ):
            raise NotFound(f"no namespace {self.kwargs['namespace']!r} in cluster {cluster.name!r}")
        return cluster, namespace

    def get_pod(self) -> Pod:
        cluster, namespace = self.get_namespace()
        name = self._path("pod")
        pod = selectors.pod_named(cluster, namespace, name) if name is not None else None
        if pod is None:
            raise NotFound(f"no pod {self.kwargs['pod']!r} in namespace {namespace!r} of cluster {cluster.name!r}")
        return pod

    def query(self, serializer_class: type) -> dict[str, Any]:
        """The query parameters validated by `serializer_class` (a 400 naming the parameter otherwise). An optional
        parameter sent empty counts as not given; a required one sent empty is a 400."""
        fields = serializer_class().fields
        data = {
            name: value
            for name, value in self.request.query_params.items()
            if value != "" or (name in fields and fields[name].required)
        }
        serializer = serializer_class(data=data)
        serializer.is_valid(raise_exception=True)
        return dict(serializer.validated_data)


class ApiListView(mixins.ListModelMixin, ApiView):
    """A paginated collection."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return self.list(request, *args, **kwargs)


@extend_schema_view(
    list=extend_schema(summary="Registered clusters"),
    retrieve=extend_schema(summary="One cluster"),
)
class ClusterViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.ViewSetMixin, ApiView):
    """Clusters registered in cputune (by name)."""

    serializer_class = ClusterSerializer
    queryset = Cluster.objects.all()
    lookup_field = "name"
    lookup_url_kwarg = "cluster"

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return Cluster.objects.none()
        return self.visibility.clusters(Cluster.objects.all())

    def get_object(self) -> Cluster:
        return self.get_cluster()


@extend_schema(summary="A cluster's nodes, with each kernel's verdict")
class NodeList(ApiListView):
    """Nodes with CPUs, kernel and its verdict (does it have the CFS slice expiry fix?), CPU manager policy, CFS slice,
    last seen, and the last kernel probe's result."""

    serializer_class = NodeSerializer

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):  # schema generation: no request to read a cluster from
            return Node.objects.none()
        cluster = self.get_cluster()
        return selectors.nodes(cluster, self.visibility)


@extend_schema(summary="A cluster's namespaces, with counts for the window", parameters=[WindowQuerySerializer])
class NamespaceList(ApiListView):
    """Namespaces with pods in the cluster: pod and container counts and, for the window, how many containers are
    throttled above the target, how many have recommendations, and the worst throttle ratio."""

    serializer_class = NamespaceRowSerializer

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return Pod.objects.none()
        cluster = self.get_cluster()
        window = self.query(WindowQuerySerializer)["window"]
        rows = selectors.namespace_rows(cluster, window=window, throttle_target=settings.CPUTUNE_THROTTLE_TARGET)
        return [row for row in rows if self.visibility.sees_namespace(cluster.pk, row["namespace"])]


@extend_schema(summary="Report rows of a namespace's containers, worst first")
class ContainerList(ApiListView):
    """Report rows (the contract's fields: CPU in millicores, ratios 0-1, times in seconds; unknown = null) for the
    window, worst first. Filters: min_throttle_ratio, kind, node; ordering, e.g. -throttle_ratio."""

    serializer_class = ReportRowSerializer
    queryset = Finding.objects.none()  # the model, for the FilterSet and the schema; select() makes the rows
    filterset_class = ContainerFilter
    filter_backends = [SelectorFilterBackend]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        self.cluster, self.namespace = self.get_namespace()
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        # report_row() already is the contract's shape and types; the serializer describes it for the schema. Running
        # the rows through it as well was most of a page's time (benchmarks/bench_api.py).
        return self.get_paginated_response([report_row(f) for f in page or []])

    def select(self, params: dict[str, Any]) -> Any:
        ratio = params["min_throttle_ratio"]
        rows = findings(
            self.cluster,
            window=params["window"],
            namespace=self.namespace,
            kind=params["kind"],
            min_throttle_ratio=None if ratio is None else float(ratio),
            node=params["node"],
        )
        return selectors.order_findings(rows, params["ordering"])


@extend_schema(
    summary="One row per (container, recommendation); ?format=csv or Accept: text/csv streams CSV",
    responses={
        200: RecommendationRowSerializer(many=True),
        (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="The recommendations CSV, streamed."),
    },
)
class RecommendationList(ApiListView):
    """One row per (container, recommendation) with the recommendations CSV's columns; JSON pages, or the whole list
    as streamed CSV (formula-safe, empty cells for unknown values) with ?format=csv or Accept: text/csv."""

    serializer_class = RecommendationRowSerializer
    queryset = Finding.objects.none()
    filterset_class = RecommendationFilter
    filter_backends = [SelectorFilterBackend]
    renderer_classes = [JSONRenderer, CSVRenderer]

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        rows = self.filter_queryset(self.get_queryset())
        if request.accepted_renderer.format == CSVRenderer.format:
            # The CSV is the whole list; page and page_size do not apply, but a malformed one is still a 400.
            Pagination().validate_parameters(request)
            response = StreamingHttpResponse(
                stream_csv(rows, RECOMMENDATION_FIELDS), content_type="text/csv; charset=utf-8"
            )
            response["Content-Disposition"] = content_disposition_header(True, self.filename)
            return response
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(RecommendationRowSerializer(page or [], many=True).data)

    def select(self, params: dict[str, Any]) -> selectors.RecommendationRows:
        name, namespace = params["cluster"], params["namespace"]
        if name is not None:
            cluster = selectors.cluster_named(name)
            if cluster is None or not self.visibility.sees_cluster(cluster.pk):
                raise NotFound(f"no cluster named {name!r}")
            clusters = [cluster]
        else:
            clusters = list(self.visibility.clusters(Cluster.objects.order_by("name")))
        if namespace is not None and not any(
            self.visibility.sees_namespace(c.pk, namespace) and selectors.namespace_exists(c, namespace)
            for c in clusters
        ):
            where = f"cluster {name!r}" if name is not None else "any cluster"
            raise NotFound(f"no namespace {namespace!r} in {where}")
        self.filename = recommendations_csv_filename(cluster=name, namespace=namespace, window=params["window"])
        return selectors.RecommendationRows(
            clusters, window=params["window"], namespace=namespace, kind=params["kind"], visibility=self.visibility
        )


@extend_schema(
    summary="Changes seen on a namespace's containers and what each did, newest first; ?format=csv streams CSV",
    responses={
        200: ChangeRowSerializer(many=True),
        (200, "text/csv"): OpenApiResponse(OpenApiTypes.STR, description="Every change of the range, streamed."),
    },
)
class ChangeList(ApiListView):
    """Each change of CPU limit or request (in-place resizes once applied, rollouts against the workload's earlier
    pod), image, restart or node seen since `since`, with the windows before and after it and a verdict
    (docs/domain.md#change-effect); JSON pages, or every change of the range as streamed CSV (the same columns)."""

    serializer_class = ChangeRowSerializer
    renderer_classes = [JSONRenderer, CSVRenderer]

    @extend_schema(parameters=[ChangesQuerySerializer])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        return self.list(request, *args, **kwargs)

    def get_queryset(self) -> Any:
        if getattr(self, "swagger_fake_view", False):
            return ContainerChange.objects.none()
        cluster, namespace = self.get_namespace()
        return changes_of(cluster, namespace, self.query(ChangesQuerySerializer)["since"])

    def list(self, request: Request, *args: Any, **kwargs: Any) -> Any:
        changes = self.get_queryset()
        if request.accepted_renderer.format == CSVRenderer.format:
            Pagination().validate_parameters(request)  # not applied to the CSV, but a malformed one is still a 400
            response = StreamingHttpResponse(
                stream_csv(change_rows_streamed(changes), CHANGE_FIELDS), content_type="text/csv; charset=utf-8"
            )
            name = changes_csv_filename(cluster=self.kwargs["cluster"], namespace=self.kwargs["namespace"])
            response["Content-Disposition"] = content_disposition_header(True, name)
            return response
        page = self.paginate_queryset(changes)
        # Each change's windows are read for the page's changes only.
        return self.get_paginated_response(change_rows(page or []))


@extend_schema(summary="A pod's time series per container, with shares floor and quota ceiling")
class PodSeries(ApiView):
    """Per container of the pod, its points between since and until (default: the last hour; at most 31 days; raw
    points up to 48 hours, hourly beyond), with request, limit, shares floor and quota ceiling for reference lines."""

    serializer_class = PodSeriesSerializer

    @extend_schema(parameters=[SeriesQuerySerializer])
    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        pod = self.get_pod()
        query = self.query(SeriesQuerySerializer)
        return Response(PodSeriesSerializer(selectors.pod_series(pod, query["since"], query["until"])).data)


@extend_schema(
    summary="A chat message about a namespace: ?format=text (default), markdown, slack (Block Kit JSON) or json",
    parameters=[SummaryQuerySerializer],
    responses={
        (200, "text/plain"): OpenApiTypes.STR,
        (200, "text/markdown"): OpenApiTypes.STR,
        # One media type for two shapes: Accept: application/json gets Slack's, ?format=json the structured facts.
        (200, "application/json"): PolymorphicProxySerializer(
            component_name="NamespaceSummaryMessage",
            serializers=[SlackMessageSerializer, NamespaceSummarySerializer],
            resource_type_field_name=None,
        ),
    },
)
class NamespaceSummaryView(ApiView):
    """A message a bot posts as is: what the window's figures cover (or that they are not computed yet), the
    containers over the throttle target and those with advice, each with its ratio and every recommendation, and a
    link to the namespace report for the window. ?format=text (default), markdown, slack (Block Kit JSON, also
    Accept: application/json), or json (the same facts, structured)."""

    renderer_classes = [PlainTextRenderer, MarkdownRenderer, SlackRenderer, JSONRenderer]

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        cluster, namespace = self.get_namespace()
        query = self.query(SummaryQuerySerializer)
        summary = selectors.namespace_summary(
            cluster,
            namespace,
            window=query["window"],
            throttle_target=settings.CPUTUNE_THROTTLE_TARGET,
            limit=query["limit"],
        )
        path = f"/c/{quote(cluster.name, safe='')}/ns/{quote(namespace, safe='')}/"
        url = request.build_absolute_uri(f"{path}?{urlencode({'window': query['window']})}")
        fmt = request.accepted_renderer.format
        if fmt == JSONRenderer.format:
            return Response(NamespaceSummarySerializer(chatops.as_json(summary, url)).data)
        if fmt == SlackRenderer.format:
            return Response(chatops.as_slack(summary, url))
        if fmt == MarkdownRenderer.format:
            return Response(chatops.as_markdown(summary, url))
        return Response(chatops.as_text(summary, url))


@extend_schema(
    summary="Does this kernel have the CFS slice expiry fix?",
    parameters=[KernelCheckQuerySerializer],
    responses=KernelVerdictSerializer,
)
class KernelCheckView(ApiView):
    """The verdict on a kernel release string: fixed, affected or unknown, the bug, the versions that fix it, and why."""

    def get(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        version = self.query(KernelCheckQuerySerializer)["version"]
        return Response(KernelVerdictSerializer(kernel_verdict(version)).data)


def _flatten(errors: Any, path: str = "") -> list[tuple[str, str]]:
    """DRF's nested errors as (field path, message) pairs: containers[3].periods_total, node.name, ..."""
    if isinstance(errors, dict):
        pairs = []
        for key, value in errors.items():
            if key == "non_field_errors":
                child = path
            elif isinstance(key, int) or str(key).isdigit():  # DRF keys list items' errors by index
                child = f"{path}[{key}]"
            else:
                child = f"{path}.{key}" if path else str(key)
            pairs += _flatten(value, child)
        return pairs
    if isinstance(errors, list):
        if all(isinstance(item, str) for item in errors):
            return [(path or "body", str(item)) for item in errors]
        pairs = []
        for index, item in enumerate(errors):
            pairs += _flatten(item, f"{path}[{index}]")
        return pairs
    return [(path or "body", str(errors))]


@extend_schema(
    summary="Node agents push cgroup counters here (ingest-scope tokens only)",
    request=AgentPayloadSerializer,
    responses=PushResultSerializer,
)
class IngestView(ApiView):
    """A node agent's batch of cgroup counters (see agent/cputune_agent.py). Every field is validated; cgroups are
    matched to known containers by runtime id; unmatched ones come back in `unknown` with the reason."""

    schema = IngestSchema()
    # OPTIONS describes the body from it (without one DRF's metadata answered 500); post() validates with it too.
    serializer_class = AgentPayloadSerializer
    permission_classes = [CanIngest]
    parser_classes = [BoundedJSONParser]

    def post(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        payload = AgentPayloadSerializer(data=request.data)
        if not payload.is_valid():
            pairs = _flatten(payload.errors)
            by_field: dict[str, list[str]] = {}
            for field, message in pairs:
                by_field.setdefault(field, []).append(message)
            # `detail` first and flat: the agent logs the first 300 characters of a refusal.
            raise ValidationError(
                {"detail": "; ".join(f"{field}: {message}" for field, message in pairs[:5]), "errors": by_field}
            )
        batch = payload.to_batch()
        throttle = NodePushThrottle(batch.node.name)
        if not throttle.allow_request(request, self):
            self.throttled(request, throttle.wait() or 1.0)
        token = request.auth if isinstance(request.auth, ApiToken) else None  # CanIngest: always a token
        try:
            result = ingest_agent_batch(
                batch, cluster=token.cluster if token else None, token_node=token.node_name if token else ""
            )
        except PushForbidden as exc:
            raise PermissionDenied(str(exc)) from None
        except PushRejected as exc:
            raise ValidationError({"detail": str(exc), "errors": {"node.name": [str(exc)]}}) from None
        return Response(PushResultSerializer(result).data)


@extend_schema(
    summary="Prometheus metrics: findings per container (1h window) and collection health",
    responses={(200, "text/plain"): OpenApiTypes.STR},
)
class MetricsView(ApiView):
    """Prometheus text (or OpenMetrics when asked): per container throttle ratio, p95 usage, limit and request for the
    1h window, and one series per (container, recommendation kind); per cluster the last successful collection and
    the last run's node outcomes and duration."""

    content_negotiation_class = FirstRendererNegotiation

    def get(self, request: Request, *args: Any, **kwargs: Any) -> HttpResponse:
        encoder, content_type = choose_encoder(request.headers.get("Accept", ""))
        return HttpResponse(encoder(CputuneCollector(visibility=self.visibility)), content_type=content_type)
