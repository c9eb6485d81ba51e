"""The REST API: thin, versioned adapters over selectors."""

from __future__ import annotations

from rest_framework import viewsets

from apps.clusters.models import Cluster

from .serializers import ClusterSerializer


class ClusterViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = ClusterSerializer
    queryset = Cluster.objects.all()
    lookup_field = "name"
