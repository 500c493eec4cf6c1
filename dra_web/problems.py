"""The one shape of every error the API answers, whatever its status (400, 401, 403, 404, 405,
409, 413, 415, 429, 500):

    {"detail": "options.timeout: at most 300 seconds ...", "errors": ["options.timeout: ..."]}

``detail`` is one message a person reads; ``errors`` lists every problem on its own, each
naming its field (``status: must be one of ...``), or for an upload the file, document, object
and field (CONTRACT section 1). An error with one problem lists it alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from django.http import JsonResponse
from rest_framework import serializers
from rest_framework.response import Response

# DRF's key for errors of the whole input rather than one field.
_WHOLE_INPUT = "non_field_errors"


def problem_body(detail: str, errors: Sequence[str] = ()) -> dict[str, Any]:
    return {"detail": detail, "errors": list(errors) or [detail]}


def problem(status: int, detail: str, errors: Sequence[str] = ()) -> Response:
    """An API view's error answer."""
    return Response(problem_body(detail, errors), status=status)


def field_problem(field: str, message: str) -> Response:
    """A 400 for one bad field (a query parameter, a body field)."""
    return problem(400, f"{field}: {message}")


def problem_json(status: int, detail: str) -> JsonResponse:
    """The same body outside DRF's views (Django's error handlers, middleware)."""
    return JsonResponse(problem_body(detail), status=status)


def flatten(data: Any, field: str = "") -> list[str]:
    """DRF's error details (a message, a list, a dict per field, nested for nested input) as
    ``field: message`` lines, the field path dotted (``options.timeout``, ``items[2].name``)."""
    if isinstance(data, Mapping):
        out: list[str] = []
        for key, value in data.items():
            if key == _WHOLE_INPUT:
                out += flatten(value, field)
            else:
                out += flatten(value, f"{field}.{key}" if field else str(key))
        return out
    if isinstance(data, list | tuple):
        if all(isinstance(item, str) for item in data):
            return [f"{field}: {item}" if field else str(item) for item in data]
        out = []
        for index, item in enumerate(data):
            out += flatten(item, f"{field}[{index}]")
        return out
    return [f"{field}: {data}" if field else str(data)]


def from_drf(data: Any) -> dict[str, Any]:
    """The body of an error DRF's exception handler built (``{"detail": ...}`` for most,
    the per-field dict or list of a ValidationError), in the one shape."""
    if isinstance(data, Mapping) and set(data) == {"detail"}:
        return problem_body(str(data["detail"]))
    errors = flatten(data) or ["request: invalid input"]
    detail = errors[0] if len(errors) == 1 else f"{len(errors)} problems: " + "; ".join(errors)
    return problem_body(detail, errors)


class ProblemSerializer(serializers.Serializer):
    """The error body in the OpenAPI document."""

    detail = serializers.CharField()
    errors = serializers.ListField(child=serializers.CharField())
