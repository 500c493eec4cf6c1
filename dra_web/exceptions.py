"""The REST API's exception handler: every error is JSON in the one shape (dra_web.problems),
and an unexpected exception is logged and answered with a generic 500 that does not echo its
text."""

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
from rest_framework.views import exception_handler as drf_exception_handler

from dra_web.problems import from_drf, problem

log = logging.getLogger("dra_web.api")

INTERNAL_ERROR = "internal error: the request failed; the server logged the details"


def api_exception_handler(exc, context):
    response = drf_exception_handler(exc, context)
    if response is not None:
        # DRF's answer keeps its status and headers (WWW-Authenticate, Retry-After); its body
        # takes the one shape.
        response.data = from_drf(response.data)
        return response
    if isinstance(exc, TooManyFilesSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FILES
        return problem(
            400, f"file: more than {limit} files in one upload; send them as fewer files"
        )
    if isinstance(exc, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return problem(400, f"request: more than {limit} form fields")
    if isinstance(exc, RequestDataTooBig):
        return problem(
            status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
            "request: body larger than the limit "
            f"({settings.DRA_WEB_MAX_UPLOAD_BYTES} bytes, DRA_WEB_MAX_UPLOAD_BYTES)",
        )
    if isinstance(exc, SuspiciousOperation):
        return problem(400, "request: malformed request")
    if isinstance(exc, RecursionError):
        return problem(400, "request: input nested too deeply")
    view = context.get("view")
    where = type(view).__name__ if view is not None else "API"
    if isinstance(exc, DatabaseError):
        log.error("database error in %s", where, exc_info=exc)
        return problem(500, "internal error: the database could not complete the request")
    log.error("unexpected error in %s", where, exc_info=exc)
    return problem(500, INTERNAL_ERROR)
