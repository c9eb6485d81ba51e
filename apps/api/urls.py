from django.contrib.auth.decorators import login_not_required
from django.urls import path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from . import views

app_name = "api"

# The API authenticates with tokens (or the dashboard's session), so the site-wide login redirect does not apply.
urlpatterns = [
    path("v1/clusters/", login_not_required(views.ClusterViewSet.as_view({"get": "list"})), name="clusters"),
    path("schema/", login_not_required(SpectacularAPIView.as_view()), name="schema"),
    path("docs/", login_not_required(SpectacularSwaggerView.as_view(url_name="api:schema")), name="docs"),
]
