"""WSGI entry point (gunicorn dra_web.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dra_web.settings")

application = get_wsgi_application()
