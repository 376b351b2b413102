import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aicr_site.settings")

app = Celery("aicr_site")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
