from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    name = "apps.telemetry"
    label = "telemetry"
