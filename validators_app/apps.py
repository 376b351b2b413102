from django.apps import AppConfig


class ValidatorsConfig(AppConfig):
    name = "validators_app"

    def ready(self) -> None:
        from aicr_site import secrets  # noqa: F401 - registers the production-secrets check
        from validators_app import checks  # noqa: F401 - registers the system checks
