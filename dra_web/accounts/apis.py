"""Token endpoints: obtain with username/password, or get/rotate your own when logged in."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.authtoken.views import ObtainAuthToken
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from dra_web.accounts import services, throttle

TokenSchema = inline_serializer("Token", {"token": serializers.CharField()})


class ObtainTokenApi(ObtainAuthToken):
    """POST username and password; answers {"token": ...} for `Authorization: Token ...`.

    Failed attempts are counted per address (throttle.LoginFailureThrottle answers 429)."""

    throttle_classes = [throttle.LoginFailureThrottle]

    @extend_schema(operation_id="auth_token", responses=TokenSchema)
    def post(self, request, *args, **kwargs):
        return super().post(request, *args, **kwargs)

    def handle_exception(self, exc):
        if isinstance(exc, ValidationError):  # wrong credentials
            throttle.record_failure(self.request)
        return super().handle_exception(exc)


class MyTokenApi(APIView):
    @extend_schema(operation_id="accounts_token_retrieve", responses=TokenSchema)
    def get(self, request):
        return Response({"token": services.token_for(request.user).key})

    @extend_schema(operation_id="accounts_token_rotate", request=None, responses=TokenSchema)
    def post(self, request):
        return Response({"token": services.token_for(request.user, rotate=True).key}, status=201)


class MeApi(APIView):
    @extend_schema(
        operation_id="accounts_me",
        responses=inline_serializer(
            "Me", {"username": serializers.CharField(), "isStaff": serializers.BooleanField()}
        ),
    )
    def get(self, request):
        return Response({"username": request.user.get_username(), "isStaff": request.user.is_staff})
