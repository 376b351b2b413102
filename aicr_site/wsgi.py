import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "aicr_site.settings")

application = get_wsgi_application()

# gunicorn refuses to boot a worker without the production secrets (aicr_site/secrets.py) or
# without collected static files; it does not wait for PostgreSQL or Redis: until they answer,
# /ready and every request say 503.
from aicr_site.startup import process_start  # noqa: E402

process_start(wait=(), web=True)
