"""A server process's warm-up: the URLconf imported and every template compiled before the
first request."""

from __future__ import annotations

from django.template import engines

from dra_web.warmup import template_names, warm_up


def test_every_project_template_is_compiled_before_the_first_request():
    names = template_names()
    assert {"base.html", "pages/run.html", "pages/_failure_body.html"} <= set(names)
    engine = engines["django"].engine
    cached = next(x for x in engine.template_loaders if hasattr(x, "get_template_cache"))
    cached.reset()
    warm_up()
    compiled = set(cached.get_template_cache)
    assert set(names) <= compiled
