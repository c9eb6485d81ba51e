from django.apps import AppConfig


class AdvisorConfig(AppConfig):
    name = "apps.advisor"
    label = "advisor"

    def ready(self) -> None:
        from apps.telemetry.signals import series_stored

        from .receivers import refresh_after_storing

        series_stored.connect(refresh_after_storing, dispatch_uid="advisor.refresh_after_storing")
