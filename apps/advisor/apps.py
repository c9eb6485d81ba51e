from django.apps import AppConfig


class AdvisorConfig(AppConfig):
    name = "apps.advisor"
    label = "advisor"
