from django.contrib import admin
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import include, path
from django.views.defaults import page_not_found


@login_not_required
def healthz(request: HttpRequest) -> JsonResponse:
    """Liveness for load balancers and compose healthchecks: the process answers and the database is reachable."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")
    return JsonResponse({"status": "ok"})


def not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A path no route matches: JSON under /api/ (a bot parses the answer, as it does every other API error), the
    site's page elsewhere."""
    if request.path.startswith("/api/"):
        return JsonResponse(
            {"detail": "No API endpoint at this path: the endpoints are listed at /api/docs/."}, status=404
        )
    return page_not_found(request, exception)


handler404 = not_found

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/", include("apps.api.urls")),
    path("healthz", healthz, name="healthz"),
    path("metrics", include("apps.api.urls_metrics")),
    path("", include("apps.dashboard.urls")),
]
