"""dra_web/pages/rendering.py: what a page's template context held (a run's result of millions
of objects) is freed when the view returns, by reference counting, not by a pass of the cycle
collector over all of it."""

from __future__ import annotations

import gc
import weakref

import pytest
from django.shortcuts import render
from django.test import RequestFactory

from dra_web.pages.rendering import reads_result, render_released


class _Result:
    """Stands for a decoded result (dicts cannot be weakly referenced)."""


def _request():
    return RequestFactory().get("/runs/1/")


def _render_and_drop(render_page) -> weakref.ref:
    result = _Result()
    held = weakref.ref(result)
    response = render_page(_request(), "pages/_pagination.html", {"result": result})
    assert response.status_code == 200
    del result, response
    return held


@pytest.fixture
def collector_off():
    was = gc.isenabled()
    gc.disable()
    yield
    if was:
        gc.enable()


def test_django_render_leaves_the_context_to_the_cycle_collector(collector_off):
    # Why the helper exists: the template context refers to itself.
    held = _render_and_drop(render)
    assert held() is not None
    gc.collect()
    assert held() is None


def test_render_released_frees_the_context_when_the_caller_lets_go(collector_off):
    held = _render_and_drop(render_released)
    assert held() is None


def test_render_released_writes_what_render_writes():
    context = {"page": None, "param": "ppage"}
    assert (
        render_released(_request(), "pages/_pagination.html", context).content
        == render(_request(), "pages/_pagination.html", context).content
    )


def test_reads_result_pauses_the_collector_until_the_view_returns():
    seen = []

    @reads_result
    def view(request):
        seen.append(gc.isenabled())
        return render_released(request, "pages/_pagination.html", {})

    assert gc.isenabled()
    view(_request())
    assert seen == [False]
    assert gc.isenabled()
