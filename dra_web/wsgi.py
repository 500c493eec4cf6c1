"""WSGI entry point (gunicorn dra_web.wsgi)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dra_web.settings")

application = get_wsgi_application()

from dra_web.warmup import warm_up  # noqa: E402  needs the settings configured above

warm_up()
