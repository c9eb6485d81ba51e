from django.apps import AppConfig


class CollectorConfig(AppConfig):
    name = "apps.collector"
    label = "collector"
