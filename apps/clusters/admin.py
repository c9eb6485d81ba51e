from django.contrib import admin

from .models import Cluster, Node, ReadGrant


@admin.register(Cluster)
class ClusterAdmin(admin.ModelAdmin):
    list_display = ["name", "source", "enabled", "kubeconfig_path", "prometheus_url", "created_at"]
    list_filter = ["source", "enabled"]
    search_fields = ["name"]


@admin.register(Node)
class NodeAdmin(admin.ModelAdmin):
    list_display = ["name", "cluster", "capacity_mcpu", "kernel_version", "cpu_manager_policy", "last_seen"]
    list_filter = ["cluster"]
    search_fields = ["name", "kernel_version"]
    readonly_fields = ["probe", "probe_at", "last_seen"]


@admin.register(ReadGrant)
class ReadGrantAdmin(admin.ModelAdmin):
    """Limit a user to clusters or namespaces: a user with no grant reads everything, a superuser always does."""

    list_display = ["user", "cluster", "namespace"]
    list_filter = ["cluster"]
    search_fields = ["user__username", "namespace"]
