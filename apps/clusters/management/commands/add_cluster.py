from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from apps.clusters.models import SourceKind
from apps.clusters.services import register_cluster


class Command(BaseCommand):
    help = "Register a cluster (or update one with the same name): a kubeconfig, in-cluster credentials, a Prometheus, or the lab."

    def add_arguments(self, parser):
        parser.add_argument("name")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument(
            "--kubeconfig", metavar="PATH", help="kubeconfig file (its current context unless --context)"
        )
        source.add_argument("--in-cluster", action="store_true", help="the pod's service account")
        source.add_argument(
            "--prometheus", metavar="URL", help="a Prometheus that scrapes cAdvisor and kube-state-metrics"
        )
        source.add_argument("--lab", action="store_true", help="this machine's lab (manage.py lab up)")
        source.add_argument(
            "--agent-only", action="store_true", help="fed only by node agents pushing to /api/v1/ingest/"
        )
        parser.add_argument("--context", default="", help="kubeconfig context")
        parser.add_argument(
            "--kubelet-direct", action="store_true", help="scrape kubelets on :10250 (needs nodes/metrics)"
        )
        parser.add_argument(
            "--read-kubelet-config",
            action="store_true",
            help="read each node's CPU manager policy via nodes/proxy (a powerful permission: opt-in)",
        )

    def handle(self, *args, name, kubeconfig, in_cluster, prometheus, lab, agent_only, context, kubelet_direct,
               read_kubelet_config, **options):  # fmt: skip
        if kubeconfig or in_cluster:
            source = SourceKind.KUBERNETES
        elif prometheus:
            source = SourceKind.PROMETHEUS
        elif lab:
            source = SourceKind.LAB
        else:
            source = SourceKind.AGENT
        if (context or kubelet_direct or read_kubelet_config) and source != SourceKind.KUBERNETES:
            raise CommandError(
                "--context, --kubelet-direct and --read-kubelet-config apply to --kubeconfig / --in-cluster"
            )
        try:
            cluster, created = register_cluster(
                name,
                source,
                kubeconfig_path=kubeconfig or "",
                kube_context=context,
                in_cluster=in_cluster,
                kubelet_direct=kubelet_direct,
                read_kubelet_config=read_kubelet_config,
                prometheus_url=prometheus or "",
            )
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        verb = "Registered" if created else "Updated"
        self.stdout.write(f"{verb} cluster {cluster.name} ({cluster.get_source_display()}).")
        if read_kubelet_config:
            self.stdout.write(
                self.style.WARNING("Reading kubelet configs needs get on nodes/proxy, which is close to node admin.")
            )
