from django.apps import AppConfig


class ReviewsConfig(AppConfig):
    name = "dra_web.reviews"
    label = "reviews"
    default_auto_field = "django.db.models.BigAutoField"
