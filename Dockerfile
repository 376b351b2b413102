FROM python:3.12-slim
WORKDIR /app
RUN pip install --no-cache-dir uv
COPY pyproject.toml uv.lock .python-version ./
RUN uv sync --frozen --no-dev
COPY . .
# Static files are collected into the image (whitenoise serves them); the settings need a key and
# hosts to load in production mode, none of which is kept.
RUN DEBUG=0 SECRET_KEY=collectstatic-only-not-a-real-key ALLOWED_HOSTS=build \
    .venv/bin/python manage.py collectstatic --no-input --verbosity 0
# The code stays root-owned and read-only to the process, which runs unprivileged.
RUN groupadd --system --gid 10001 app \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent app
USER 10001:10001
# No secret is in the image: each comes at run time as NAME or, better, a NAME_FILE mounted from
# a secret (docker-compose.yml, docs/deployment.md); without SECRET_KEY, CLUSTER_KUBECONFIG_KEY
# or SITE_SIGNING_KEY a web, worker or beat process refuses to start, naming the missing one.
ENV DEBUG=0 PYTHONDONTWRITEBYTECODE=1
EXPOSE 8000
CMD [".venv/bin/gunicorn", "aicr_site.wsgi:application", "--bind", "0.0.0.0:8000", \
     "--workers", "4", "--threads", "8", "--worker-class", "aicr_site.gunicorn_worker.ThreadWorker", \
     "--access-logfile", "-"]
