from __future__ import annotations

from rest_framework import serializers

from apps.clusters.models import Cluster


class ClusterSerializer(serializers.ModelSerializer):
    class Meta:
        model = Cluster
        fields = ["name", "source", "enabled", "created_at"]
