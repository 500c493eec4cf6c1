from django.urls import path

from dra_web.accounts import apis

urlpatterns = [
    path("auth/token/", apis.ObtainTokenApi.as_view(), name="api-auth-token"),
    path("accounts/token/", apis.MyTokenApi.as_view(), name="api-my-token"),
    path("accounts/me/", apis.MeApi.as_view(), name="api-me"),
]
