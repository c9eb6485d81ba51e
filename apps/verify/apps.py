from django.apps import AppConfig


class VerifyConfig(AppConfig):
    name = "apps.verify"
    verbose_name = "Advice verified in the lab"
