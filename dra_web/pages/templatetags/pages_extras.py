"""Template filters of the debugger pages: YAML, CEL highlighting, prices, durations."""

from __future__ import annotations

import json
import re

import yaml
from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from dra_web.pages import presenters
from dra_web.runs.storage import run_storage as stored_bytes
from dra_web.snapshots.selectors import run_kubernetes_version

register = template.Library()

_CEL_TOKEN = re.compile(
    r"(?P<str>\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')"
    r"|(?P<num>\b\d+(?:\.\d+)?\b)"
    r"|(?P<kw>\b(?:device|true|false|null|in|has|all|exists|exists_one|map|filter)\b)"
)


@register.filter
def to_yaml(value) -> str:
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=100)


@register.filter
def to_json(value) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


@register.filter
def cel(expression: str):
    """CEL source with strings, numbers and keywords marked up (escaped first)."""
    out = []
    pos = 0
    text = str(expression or "")
    for m in _CEL_TOKEN.finditer(text):
        out.append(_soft(text[pos : m.start()]))
        out.append(f'<span class="{m.lastgroup}">{_soft(m.group(0))}</span>')
        pos = m.end()
    out.append(_soft(text[pos:]))
    return mark_safe("".join(out))


def _soft(text: str) -> str:
    """Escaped, with a line break allowed after each dot and before each bracket (CEL paths
    such as device.attributes['gpu.nvidia.com'].productName wrap between their parts, never
    inside a word; copying the text is unchanged)."""
    return str(escape(text)).replace(".", ".<wbr>").replace("[", "<wbr>[")


@register.filter
def soft_breaks(value) -> str:
    """Prose that quotes CEL or device paths, wrapping between their parts (see ``_soft``)."""
    return mark_safe(_soft(str(value or "")))


@register.filter
def price(value) -> str:
    if value is None or value == "":
        return "—"
    return f"${float(value):,.3f}/h"


@register.filter
def seconds(value) -> str:
    if value is None or value == "":
        return "—"
    value = float(value)
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.2f} s"
    return f"{value / 60:.1f} min"


@register.filter
def get(mapping, key):
    if isinstance(mapping, dict):
        return mapping.get(key)
    return None


@register.filter
def pod_namespace(key: str) -> str:
    return (key or "").partition("/")[0]


@register.filter
def pod_name(key: str) -> str:
    return (key or "").partition("/")[2]


@register.filter
def percent(done, total) -> int:
    try:
        return max(0, min(100, round(100 * int(done) / int(total))))
    except (TypeError, ValueError, ZeroDivisionError):
        return 0


@register.filter
def requirement(req: dict) -> str:
    """A NodeSelectorRequirement as one readable line."""
    if not isinstance(req, dict):
        return str(req)
    values = req.get("values") or []
    op = req.get("operator") or ""
    text = f"{req.get('key')} {op}"
    if values:
        text += " " + ", ".join(str(v) for v in values)
    if req.get("minValues"):
        text += f" (minValues {req['minValues']})"
    return text


@register.filter
def anchor(key: str) -> str:
    """An id-safe anchor for a pod or claim key."""
    return re.sub(r"[^A-Za-z0-9_-]+", "-", key or "").strip("-")


@register.simple_tag(takes_context=True)
def page_url(context, param: str, value) -> str:
    """The current URL's query with ``param`` replaced (pagination that keeps filters)."""
    query = context["request"].GET.copy()
    query[param] = value
    return "?" + query.urlencode()


@register.filter
def utctime(value, fmt: str = "Y-m-d H:i:s"):
    """A ``<time>`` in UTC (``datetime="...Z"``, the UTC time on hover); static/js/app.js
    shows it in the browser's zone. ``—`` for no time."""
    from datetime import UTC

    from django.utils.dateformat import format as date_format

    if not value:
        return "—"
    utc = value.astimezone(UTC)
    iso = utc.strftime("%Y-%m-%dT%H:%M:%SZ")
    text = date_format(utc, fmt)
    return format_html(
        '<time datetime="{}" title="{} UTC" data-format="{}">{} UTC</time>', iso, text, fmt, text
    )


@register.filter
def without_managed_fields(raw):
    from dra_web.pages.presenters import without_managed_fields as strip

    return strip(raw) if isinstance(raw, dict) else raw


@register.filter
def managed_fields(raw):
    meta = raw.get("metadata") if isinstance(raw, dict) else None
    return (meta or {}).get("managedFields") if isinstance(meta, dict) else None


@register.filter
def indent_yaml(text: str, spaces: int = 2) -> str:
    pad = " " * int(spaces)
    return "\n".join(pad + line if line else line for line in str(text).rstrip("\n").split("\n"))


@register.filter
def path_wrap(value) -> str:
    """``driver/pool/device`` that wraps only after a slash: each part unbreakable (a pool named
    ``g5.12xlarge-gpus`` is never split at its hyphen), the text copied unchanged."""
    parts = [format_html('<span class="seg">{}</span>', p) for p in str(value or "").split("/")]
    return mark_safe("/<wbr>".join(parts))


# --- run options: feature gates, Kubernetes version, retention --------------------------------


@register.simple_tag
def run_form_choices(snapshot=None) -> dict:
    """What the run form offers: the Kubernetes versions (the first leaves it to the snapshot)
    and each gate's default per version."""
    snapshot = snapshot or None  # the dashboard form has no fixed snapshot
    cluster = run_kubernetes_version(snapshot) if snapshot is not None else None
    server = snapshot.kubernetes_version if snapshot is not None else ""
    return {
        "versions": presenters.version_choices(snapshot is not None, cluster, server),
        "presets": presenters.gate_presets(),
    }


@register.simple_tag
def run_gates(options) -> dict:
    """The feature gates a run had, with its preset (``presenters.gates_view``)."""
    return presenters.gates_view(options if isinstance(options, dict) else None)


@register.simple_tag
def run_storage(run) -> dict:
    """What the run takes in the database (runs.storage), in bytes."""
    return stored_bytes(run)


@register.simple_tag
def retention_days() -> int:
    """DRA_WEB_RUN_RETENTION_DAYS: how long a finished run is kept (0: for ever)."""
    from django.conf import settings

    return settings.DRA_WEB_RUN_RETENTION_DAYS


@register.filter
def size(value) -> str:
    """Bytes in kB / MB / GB (decimal, as the storage figures of docs/WEB.md)."""
    try:
        n = float(value)
    except (TypeError, ValueError):
        return "—"
    for unit in ("bytes", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{int(n)} bytes" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
