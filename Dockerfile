# dra-web: the Django web service and the Celery worker share this image.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    STATIC_ROOT=/app/staticfiles

WORKDIR /app

# Dependencies first, so that code changes do not reinstall them.
COPY pyproject.toml ./
RUN mkdir -p allocator dra_web && touch allocator/__init__.py dra_web/__init__.py \
    && pip install ".[web]" \
    && pip uninstall -y dra-web \
    && rm -rf allocator dra_web

COPY . .

# collectstatic needs settings but no database; the key is a build-time placeholder only.
RUN SECRET_KEY="$(python -c 'import secrets; print(secrets.token_urlsafe(50))')" DEBUG=false \
    python manage.py collectstatic --noinput \
    && useradd --system --uid 10001 --home /app dra \
    && chown -R dra /app
USER dra

EXPOSE 8000
CMD ["gunicorn", "dra_web.wsgi:application", "--bind", "0.0.0.0:8000", "--workers", "3", \
     "--timeout", "120", "--access-logfile", "-"]
