from django.apps import AppConfig


class ValidatorsConfig(AppConfig):
    name = "validators_app"
