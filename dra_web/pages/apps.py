from django.apps import AppConfig


class PagesConfig(AppConfig):
    name = "dra_web.pages"
    label = "pages"
    default_auto_field = "django.db.models.BigAutoField"
