"""The REST API's exception handler: every error is JSON with a message, and an unexpected
exception is logged and answered with a generic 500 that does not echo its text."""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import (
    RequestDataTooBig,
    SuspiciousOperation,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.db import DatabaseError
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

log = logging.getLogger("dra_web.api")


def _problem(message: str, code: int) -> Response:
    return Response({"detail": message, "errors": [message]}, status=code)


def api_exception_handler(exc, context):
    response = drf_exception_handler(exc, context)
    if response is not None:
        return response
    if isinstance(exc, TooManyFilesSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES
        return _problem(
            f"file: more than {limit} files in one upload; send them as fewer files", 400
        )
    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return _problem(f"request: more than {limit} form fields", 400)
    if isinstance(exc, RequestDataTooBig):
        return _problem(
            "request: body larger than the limit "
            f"({settings.DRA_WEB_MAX_UPLOAD_BYTES} bytes, DRA_WEB_MAX_UPLOAD_BYTES)",
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    if isinstance(exc, SuspiciousOperation):
        return _problem("request: malformed request", 400)
    if isinstance(exc, RecursionError):
        return _problem("request: input nested too deeply", 400)
    view = context.get("view")
    where = type(view).__name__ if view is not None else "API"
    if isinstance(exc, DatabaseError):
        log.error("database error in %s", where, exc_info=exc)
        return _problem("internal error: the database could not complete the request", 500)
    log.error("unexpected error in %s", where, exc_info=exc)
    return _problem("internal error: the request failed; the server logged the details", 500)
