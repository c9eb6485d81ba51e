"""/metrics, mounted at the site root by cputune/urls.py (Prometheus scrapes /metrics by default)."""

from django.contrib.auth.decorators import login_not_required
from django.urls import path

from . import views

urlpatterns = [path("", login_not_required(views.MetricsView.as_view()), name="metrics")]
