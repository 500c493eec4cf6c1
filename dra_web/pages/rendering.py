"""Rendering the pages that read a run's result: tens of megabytes of JSON decoded into
millions of objects, none in a reference cycle.

Django's template context refers to itself (each dict it pushes points back at it), so what
a page's context holds is freed only by the cycle collector, and its pass over a 51 MB
result's objects was half the run page's time (0.25 s of 0.5 s). Here the collector is paused
while such a view runs, and the context is emptied once rendered, so the result is freed by
reference counting when the view returns, before collecting resumes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.template import loader
from django.template.context import make_context

from allocator.collector import collector_paused


def reads_result(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The view run with the cycle collector paused to its return (its locals freed)."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        with collector_paused():
            return view(request, *args, **kwargs)

    return wrapped


def render_released(
    request: HttpRequest, template_name: str, context: dict[str, Any], status: int = 200
) -> HttpResponse:
    """``django.shortcuts.render``, with the template context emptied once rendered."""
    template = loader.get_template(template_name)
    rendering = make_context(context, request, autoescape=template.backend.engine.autoescape)
    try:
        content = template.template.render(rendering)
    finally:
        for layer in rendering.dicts:
            layer.clear()
    return HttpResponse(content, status=status)
