from django.contrib.auth.decorators import login_not_required
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from . import views

app_name = "api"

NAMESPACE = "v1/clusters/<str:cluster>/namespaces/<str:namespace>/"

# The API authenticates with tokens (or the dashboard's session), so the site-wide login redirect does not apply:
# every data endpoint answers 401/403 itself. The schema and its docs page are public on purpose: they describe the
# API's shape, not any cluster's data, and a client needs them before it has a token.
urlpatterns = [
    path("v1/clusters/", login_not_required(views.ClusterViewSet.as_view({"get": "list"})), name="clusters"),
    path(
        "v1/clusters/<str:cluster>/",
        login_not_required(views.ClusterViewSet.as_view({"get": "retrieve"})),
        name="cluster",
    ),
    path("v1/clusters/<str:cluster>/nodes/", login_not_required(views.NodeList.as_view()), name="nodes"),
    path("v1/clusters/<str:cluster>/namespaces/", login_not_required(views.NamespaceList.as_view()), name="namespaces"),
    path(NAMESPACE + "containers/", login_not_required(views.ContainerList.as_view()), name="containers"),
    path(NAMESPACE + "changes/", login_not_required(views.ChangeList.as_view()), name="changes"),
    path(NAMESPACE + "pods/<str:pod>/series/", login_not_required(views.PodSeries.as_view()), name="pod-series"),
    path(NAMESPACE + "summary/", login_not_required(views.NamespaceSummaryView.as_view()), name="summary"),
    path("v1/recommendations/", login_not_required(views.RecommendationList.as_view()), name="recommendations"),
    path("v1/kernel-check/", login_not_required(views.KernelCheckView.as_view()), name="kernel-check"),
    path("v1/ingest/", login_not_required(views.IngestView.as_view()), name="ingest"),
    path("schema/", login_not_required(SpectacularAPIView.as_view()), name="schema"),
    # The split view serves Swagger UI's start-up script as a file of its own (?script), so the CSP needs no inline
    # script. An HTML page: OPTIONS would render DRF's metadata through its template renderer, which has no template (500).
    path(
        "docs/",
        login_not_required(
            SpectacularSwaggerSplitView.as_view(url_name="api:schema", http_method_names=["get", "head"])
        ),
        name="docs",
    ),
]
