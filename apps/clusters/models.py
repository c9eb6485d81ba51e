"""What runs where: clusters, their nodes, pods and containers, as last seen by a collection."""

from __future__ import annotations

from django.conf import settings
from django.db import models

from .info import POD_CGROUP


class SourceKind(models.TextChoices):
    KUBERNETES = "kubernetes", "Kubernetes API + kubelet cAdvisor"
    PROMETHEUS = "prometheus", "Prometheus + kube-state-metrics"
    LAB = "lab", "Lab (real cgroups on this machine)"
    DUMP = "dump", "Offline dumps (import_dump)"
    AGENT = "agent", "Node agents only (push)"


class Cluster(models.Model):
    name = models.SlugField(max_length=63, unique=True)
    source = models.CharField(max_length=16, choices=SourceKind.choices, default=SourceKind.KUBERNETES)
    kubeconfig_path = models.CharField(max_length=500, blank=True)
    kube_context = models.CharField(max_length=253, blank=True)
    in_cluster = models.BooleanField(default=False, help_text="Use the pod's service account instead of a kubeconfig.")
    kubelet_direct = models.BooleanField(
        default=False,
        help_text="Scrape kubelets on :10250 directly (needs nodes/metrics) instead of the API server proxy.",
    )
    read_kubelet_config = models.BooleanField(
        default=False,
        help_text="Read each node's kubelet config (CPU manager policy) via nodes/proxy — a powerful permission, opt-in.",
    )
    prometheus_url = models.URLField(blank=True)
    enabled = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Node(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="nodes")
    name = models.CharField(max_length=253)
    capacity_mcpu = models.PositiveIntegerField(null=True, blank=True)
    allocatable_mcpu = models.PositiveIntegerField(null=True, blank=True)
    kernel_version = models.CharField(max_length=200, blank=True)
    os_image = models.CharField(max_length=200, blank=True)
    container_runtime = models.CharField(max_length=200, blank=True)
    kubelet_version = models.CharField(max_length=100, blank=True)
    cpu_manager_policy = models.CharField(max_length=32, blank=True, help_text="Empty when not known.")
    cfs_slice_us = models.PositiveIntegerField(null=True, blank=True)
    cpufreq_governor = models.CharField(max_length=32, blank=True)
    has_cfs_counters = models.BooleanField(
        null=True, blank=True, help_text="False when this node's kubelet exposes no container_cpu_cfs_* series."
    )
    has_pressure = models.BooleanField(
        null=True, blank=True, help_text="False when this node's readings carry no CPU pressure (PSI) series."
    )
    cgroup_version = models.PositiveSmallIntegerField(
        null=True, blank=True, help_text="1 or 2 as detected from the readings; null when not known."
    )
    # Database defaults too: the ingest's SQL creates nodes itself.
    weight_mapping = models.CharField(
        max_length=16,
        blank=True,
        db_default="",
        help_text="cgroup v2 shares→weight mapping seen on this node: linear | quadratic; empty when not known.",
    )
    cgroup_evidence = models.CharField(
        max_length=200, blank=True, db_default="", help_text="What the cgroup facts were read from."
    )
    probe = models.JSONField(null=True, blank=True, help_text="The last kernel probe's measured result.")
    probe_at = models.DateTimeField(null=True, blank=True)
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "name"]
        constraints = [models.UniqueConstraint(fields=["cluster", "name"], name="node_unique_per_cluster")]

    def __str__(self) -> str:
        return f"{self.cluster}/{self.name}"

    @property
    def cpus(self) -> float | None:
        mcpu = self.capacity_mcpu or self.allocatable_mcpu
        return mcpu / 1000 if mcpu else None


class Pod(models.Model):
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="pods")
    namespace = models.CharField(max_length=63)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node = models.ForeignKey(Node, null=True, blank=True, on_delete=models.SET_NULL, related_name="pods")
    qos_class = models.CharField(max_length=16, blank=True)
    workload_kind = models.CharField(max_length=63, blank=True)
    workload_name = models.CharField(max_length=253, blank=True)
    # A database default too: the ingest's SQL creates pods for readings the inventory has not listed yet.
    resize_status = models.CharField(
        max_length=32, blank=True, default="", db_default="", help_text="An in-place resize not yet done."
    )
    resize_message = models.CharField(max_length=300, blank=True, default="", db_default="")
    request_mcpu = models.PositiveIntegerField(null=True, blank=True, help_text="Pod-level request (spec.resources).")
    limit_mcpu = models.PositiveIntegerField(null=True, blank=True, help_text="Pod-level limit (spec.resources).")
    init_limit_mcpu = models.PositiveIntegerField(
        null=True, blank=True, help_text="The init phase's CPU limit (largest init container + earlier sidecars)."
    )
    # A database default too: the ingest's SQL creates pods for readings the inventory has not listed yet.
    init_unlimited = models.BooleanField(
        default=False, db_default=False, help_text="An init container declares no CPU limit: no pod-level quota."
    )
    last_seen = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["cluster", "namespace", "name"]
        constraints = [
            models.UniqueConstraint(fields=["cluster", "namespace", "name"], name="pod_unique_per_namespace")
        ]
        indexes = [models.Index(fields=["cluster", "uid"], name="pod_uid")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


# POD_CGROUP names a pod's own cgroup among its containers (apps.clusters.info); the default manager leaves it out.


class ContainerManager(models.Manager["Container"]):
    """The pod's containers, without the pod's own cgroup (POD_CGROUP), which only the pod page's pod-level figures
    and the ingest read."""

    def get_queryset(self) -> models.QuerySet[Container]:
        return super().get_queryset().exclude(name=POD_CGROUP)


class Container(models.Model):
    pod = models.ForeignKey(Pod, on_delete=models.CASCADE, related_name="containers")
    name = models.CharField(max_length=253)
    container_id = models.CharField(max_length=128, blank=True)
    request_mcpu = models.PositiveIntegerField(null=True, blank=True)
    limit_mcpu = models.PositiveIntegerField(null=True, blank=True)
    period_us = models.PositiveIntegerField(null=True, blank=True, help_text="CFS period as read; 100000 by default.")
    restarts = models.PositiveIntegerField(default=0)
    spec_request_mcpu = models.PositiveIntegerField(
        null=True, blank=True, help_text="The spec's request while it differs from the applied one (a resize)."
    )
    spec_limit_mcpu = models.PositiveIntegerField(null=True, blank=True)
    # Database defaults too: the ingest's SQL creates containers the inventory has not listed yet.
    image = models.CharField(max_length=500, blank=True, default="", db_default="", help_text="The spec's image.")
    cpu_env = models.JSONField(
        default=dict, db_default={}, blank=True, help_text="CPU-related env vars of the spec: name → literal value."
    )
    last_seen = models.DateTimeField(null=True, blank=True)

    with_pod_cgroups = models.Manager()
    objects = ContainerManager()

    class Meta:
        default_manager_name = "objects"  # related lookups (pod.containers) leave the pod cgroup out too
        ordering = ["pod", "name"]
        constraints = [models.UniqueConstraint(fields=["pod", "name"], name="container_unique_per_pod")]
        indexes = [models.Index(fields=["container_id"], name="container_runtime_id")]

    def __str__(self) -> str:
        return f"{self.pod}/{self.name}"


class ContainerChange(models.Model):
    """A change the inventory saw on a stored container: its applied CPU limit or request (an in-place resize counts
    when the status applies it), its image, its CPU env vars (GOMAXPROCS and the like), a restart, its pod moving to
    another node, or its node's kernel
    (recorded on every container the node runs); or, for a new pod of a workload, a limit, request or image unlike
    its earlier pods' (a rollout; `previous` is that earlier container). The refresh adds one more kind from the
    series: the thread count settling at a new level (`threads`).
    Recorded when the next inventory differs from the stored one, at that inventory's time: the change happened
    after `since` (the inventory before; None: one collection interval earlier) and at most at `seen_at`.

    Changes that are one act of an operator form a group (docs/domain.md#change-groups): what one container's
    inventory shows at once (a resize of limit and request, a new image with its restart), and the pods of one
    workload that change the same way in a rollout. The group's first change stands for it (`group` is itself);
    pages, the API and the chat list those only."""

    class Kind(models.TextChoices):
        LIMIT = "limit", "CPU limit"
        REQUEST = "request", "CPU request"
        IMAGE = "image", "image"
        RESTART = "restart", "restart"
        NODE = "node", "node"
        KERNEL = "kernel", "node's kernel"
        THREADS = "threads", "thread count"
        ENV = "env", "CPU env vars"

    container = models.ForeignKey(Container, on_delete=models.CASCADE, related_name="changes")
    # A rollout: the workload's earlier pod whose container ran the values before (its series is the "before").
    previous = models.ForeignKey(Container, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    seen_at = models.DateTimeField()
    since = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=16, choices=Kind.choices)
    # As the inventory stores them: millicores, the image reference, the restart count, the node's name; "" = none.
    before = models.CharField(max_length=500, blank=True)
    after = models.CharField(max_length=500, blank=True)
    # The change that stands for this one's group (itself for that one); None only until grouped, in the same
    # inventory write (apps/clusters/change_groups.py).
    group = models.ForeignKey("self", null=True, blank=True, on_delete=models.CASCADE, related_name="members")

    class Meta:
        ordering = ["seen_at", "container", "kind"]
        indexes = [
            models.Index(fields=["container", "seen_at"], name="change_by_container"),
            models.Index(fields=["seen_at"], name="change_by_time"),
        ]
        constraints = [
            models.UniqueConstraint(fields=["container", "kind", "seen_at"], name="change_once_per_instant"),
        ]

    def __str__(self) -> str:
        return f"{self.container} {self.kind} {self.before or 'none'} → {self.after or 'none'} @ {self.seen_at:%F %T}"


CHANGE_KINDS: tuple[str, ...] = tuple(ContainerChange.Kind.values)  # the API's enum of change kinds


class ReadGrant(models.Model):
    """What one user may read: a whole cluster (namespace empty) or one namespace of it. A user with no grant reads
    every cluster (as before grants existed); superusers always do. apps/clusters/visibility.py applies them."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="read_grants")
    cluster = models.ForeignKey(Cluster, on_delete=models.CASCADE, related_name="read_grants")
    namespace = models.CharField(max_length=63, blank=True, help_text="Empty: every namespace of the cluster.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "cluster", "namespace"], name="read_grant_unique"),
        ]
        ordering = ["user", "cluster", "namespace"]

    def __str__(self) -> str:
        return f"{self.user} reads {self.cluster}{'/' + self.namespace if self.namespace else ''}"
