from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.urls import include, path


@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers and compose healthchecks: the process answers and the database is reachable."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("apps.api.urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", include("apps.api.urls_metrics")),
    path("", include("apps.dashboard.urls")),
]
