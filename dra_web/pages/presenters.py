"""Turn a run's result document (docs/RESULT.md) and a snapshot's objects into what the
pages show.

Pure functions over plain dicts: the result may come from any version of the scheduler, so
every field is read with a default and unknown fields are passed through, never required.
"""

from __future__ import annotations

import json
import re
from collections import Counter, OrderedDict
from collections.abc import Collection, Mapping, Sequence
from functools import lru_cache
from typing import Any

import orjson
from django.core.paginator import Page, Paginator

from allocator.edits import object_patches
from allocator.model import Offering
from allocator.quantity import Quantity
from allocator.trace import parse_new_nodeclaim_label
from dra_web.runs.page_facts import selector_texts

# Short phrases for the reasons a target refuses a pod, in the order they are tested. The
# aggregate reads like kube-scheduler's "0/12 nodes are available: 8 Insufficient ..." line.
REASON_PHRASES: tuple[tuple[str, str], ...] = (
    ("all instance types pruned", "all instance types pruned"),
    ("no instance type can satisfy", "no instance type can satisfy the allocation"),
    ("exceeding maximum", "too many devices (exceeding maximum)"),
    ("admin access", "admin access not allowed in namespace"),
    ("failed to compile", "CEL selector failed to compile"),
    ("unsupported selector type", "unsupported selector type"),
    ("unsupported constraint type", "unsupported constraint type"),
    ("only exactly requests", "only Exactly requests supported"),
    ("incomplete", "incomplete pool"),
    ("not found", "not found"),
    ("untolerated taint", "untolerated taint"),
    ("taint", "untolerated taint"),
    ("limit", "NodePool limits exceeded"),
    ("insufficient", "insufficient resources"),
    ("resources", "insufficient resources"),
    ("incompatible", "incompatible requirements"),
    ("affinity", "incompatible requirements"),
    ("constraint", "device constraint not satisfiable"),
    ("timeout", "allocation timed out"),
    ("timed out", "allocation timed out"),
    ("device", "no free device"),
    ("allocat", "no free device"),
    ("invalid", "invalid pool"),
)


def page_of(items, per_page: int, number: str | None) -> Page:
    """The page ``number`` (a query parameter, unparsed: anything out of range is the nearest
    page) of ``items``."""
    return Paginator(items, per_page).get_page(number)


_NODEPOOL_PREFIX = re.compile(r'^incompatible with nodepool "[^"]*",\s*', re.IGNORECASE)
_DRA_PREFIX = "allocating dynamic resources"


def reason_phrase(reason: str | None) -> str:
    """The short phrase a reason is counted under."""
    return _reason_phrase(reason or "")


@lru_cache(maxsize=4096)
def _reason_phrase(reason: str) -> str:
    # Cached: a failed pod on 1,000 nodes repeats a handful of reasons 1,000 times.
    text = _NODEPOOL_PREFIX.sub("", (reason or "").strip())
    dra = text.lower().startswith(_DRA_PREFIX)
    if dra:
        # Karpenter wraps every allocator error this way: classify what follows, and count
        # an otherwise unexplained DRA failure as "no free device".
        text = text[len(_DRA_PREFIX) :].lstrip(" ,:")
    low = text.lower()
    for needle, phrase in REASON_PHRASES:
        if dra and phrase == "insufficient resources":
            continue
        if needle in low:
            return phrase
    if dra:
        return "no free device"
    first = re.split(r"[:;,(]", text, maxsplit=1)[0].strip()
    return (first[:60] or "unknown reason").rstrip(".")


def target_group(target: str | None, node_claims: Collection[str] = ()) -> str:
    """``nodepool/NAME`` -> NodePools; ``node/NAME`` -> NodeClaims when NAME is one this run
    creates (the result names them ``node/`` too), nodes otherwise."""
    target = target or ""
    if target.startswith("node/"):  # the common case first: thousands of nodes
        return "NodeClaims" if target[5:] in node_claims else "nodes"
    prefix, _, name = target.partition("/")
    if prefix.lower() == "nodepool":
        return "NodePools"
    if prefix.lower() == "node" and name not in node_claims:
        return "nodes"
    return "NodeClaims"


def target_name(target: str | None, node_claims: Collection[str] = ()) -> str:
    """One naming of the run's NodeClaims on every page: the result's ``node/NAME`` for a
    NodeClaim this run creates reads ``nodeclaim/NAME`` (as in the search tree)."""
    target = target or ""
    if target.startswith("node/") and target[5:] in node_claims:
        return "nodeclaim/" + target[5:]
    return target


def aggregate_reasons(reasons: list[dict[str, Any]], node_claims: Collection[str] = ()) -> str:
    """``0/12 nodes: 8 no free device, 4 incompatible requirements; 0/2 NodePools: ...``.

    Groups are nodes, then in-flight NodeClaims, then NodePools last (as Karpenter logs).
    """
    return aggregate_groups(reason_groups(reasons, node_claims))


def aggregate_groups(rows: list[dict[str, Any]]) -> str:
    """``aggregate_reasons`` from the rows of ``reason_groups`` (computed once per pod)."""
    groups: OrderedDict[str, Counter] = OrderedDict(
        (name, Counter()) for name in ("nodes", "NodeClaims", "NodePools")
    )
    for row in rows:
        groups[row["group"]][row["phrase"]] += row["count"]
    parts = []
    for name, counts in groups.items():
        total = sum(counts.values())
        if not total:
            continue
        detail = ", ".join(
            f"{n} {phrase}" for phrase, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        )
        parts.append(f"0/{total} {name}: {detail}")
    return "; ".join(parts)


def node_claim_names(result: dict[str, Any] | None) -> set[str]:
    return {nc.get("name") for nc in (result or {}).get("nodeClaims") or []}


def failure_overview(pods: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """Across every failed pod: how many failed for each phrase of its ``error``."""
    counts = Counter(reason_phrase(p.get("error")) for p in pods if not p.get("scheduled"))
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def target_text(target: dict[str, Any] | None) -> str:
    if not target:
        return "—"
    kind = target.get("kind") or ""
    name = target.get("name") or ""
    suffix = " (new)" if target.get("new") else ""
    return f"{kind} {name}{suffix}".strip()


def result_view(result: dict[str, Any] | None) -> dict[str, Any]:
    """The run page's view of a result: failed pods first, NodeClaims with cost, pools."""
    result = result or {}
    pods = list(result.get("pods") or [])
    failed = [p for p in pods if not p.get("scheduled")]
    scheduled = [p for p in pods if p.get("scheduled")]
    node_claims = list(result.get("nodeClaims") or [])
    for nc in node_claims:
        nc["cost"] = node_claim_cost(nc)
        nc["zones"] = node_claim_zones(nc)
    stats = dict(result.get("stats") or {})
    stats.setdefault("pods", len(pods))
    stats.setdefault("scheduled", len(scheduled))
    stats.setdefault("failed", len(failed))
    return {
        "pods": pods,
        "failed": failed,
        "scheduled": scheduled,
        # Pods Karpenter would not provision for (CONTRACT section 4, ``ignoredPods``).
        "ignored": list(result.get("ignoredPods") or []),
        "node_claims": node_claims,
        "stats": stats,
        "failure_overview": failure_overview(pods),
        "feature_gates": result.get("featureGates") or {},
        "pools": result.get("pools") or [],
        "device_taint_rules": result.get("deviceTaintRules") or [],
        "gating": result.get("initializationGating") or [],
        "disruption": result.get("disruption"),
        "warnings": result.get("warnings") or [],
        "total_cost": sum(nc["cost"]["price"] or 0 for nc in node_claims),
        # Pods failing where a NodeClaim would be expected, for want of a NodePool.
        "no_nodepool_failures": sum(
            1 for p in failed if isinstance(p.get("cause"), dict) and p["cause"].get("noNodePool")
        ),
    }


def node_claim_zones(nc: dict[str, Any]) -> list[str]:
    """The zones the NodeClaim may launch in, from its zone requirement ([] when any zone)."""
    for r in nc.get("requirements") or []:
        if (
            isinstance(r, dict)
            and r.get("key") == "topology.kubernetes.io/zone"
            and r.get("operator") == "In"
        ):
            return [str(v) for v in r.get("values") or []]
    return []


def node_claim_cost(nc: dict[str, Any]) -> dict[str, Any]:
    """The price of the cheapest remaining instance type, as the result records it.

    The scheduler may put prices on the NodeClaim (``price``, ``cost`` or per instance type in
    ``instanceTypeDetails``/``offerings``); without them the cost is unknown (None)."""
    for key in ("price", "cost", "hourlyPrice"):
        value = nc.get(key)
        if isinstance(value, int | float):
            return {"price": float(value), "instanceType": None}
        if isinstance(value, dict) and isinstance(value.get("price"), int | float):
            return {"price": float(value["price"]), "instanceType": value.get("instanceType")}
    best: tuple[float, str] | None = None
    for detail in nc.get("instanceTypeDetails") or nc.get("offerings") or []:
        if not isinstance(detail, dict):
            continue
        price = detail.get("price")
        if isinstance(price, int | float) and (best is None or price < best[0]):
            best = (float(price), detail.get("name") or detail.get("instanceType") or "")
    if best:
        return {"price": best[0], "instanceType": best[1]}
    return {"price": None, "instanceType": None}


_ZONE_KEY = "topology.kubernetes.io/zone"
_CAPACITY_TYPE_KEY = "karpenter.sh/capacity-type"


def _allowed_values(requirements: list[dict[str, Any]] | None, key: str):
    """A predicate over a label's values from NodeSelectorRequirements (In / NotIn / Exists /
    DoesNotExist on that key; anything allowed when the key is not constrained)."""
    checks = []
    for r in requirements or []:
        if not isinstance(r, dict) or r.get("key") != key:
            continue
        op, values = r.get("operator"), {str(v) for v in r.get("values") or []}
        if op == "In":
            checks.append(lambda v, values=values: v in values)
        elif op == "NotIn":
            checks.append(lambda v, values=values: v not in values)
        elif op == "DoesNotExist":
            checks.append(lambda v: False)
    return lambda v: all(check(v) for check in checks)


def allowed_prices(
    offerings: Mapping[str, Sequence[Offering]],
    requirements: list[dict[str, Any]] | None,
    names: Collection[str] | None = None,
) -> dict[str, float]:
    """Per instance type (``offerings`` by name), the cheapest available offering whose capacity
    type and zone the NodeClaim's requirements allow (they carry its NodePool's): an
    on-demand-only NodePool shows no spot price."""
    zone_ok = _allowed_values(requirements, _ZONE_KEY)
    capacity_ok = _allowed_values(requirements, _CAPACITY_TYPE_KEY)
    # Asked once per (zone, capacity type): a NodeClaim of 400 instance types has thousands
    # of offerings in a handful of places.
    allowed: dict[tuple[str, str], bool] = {}
    out: dict[str, float] = {}
    for name in names if names is not None else offerings:
        best: float | None = None
        for o in offerings.get(name) or ():
            if not o.available:
                continue
            where = (o.zone, o.capacity_type)
            ok = allowed.get(where)
            if ok is None:
                ok = allowed[where] = zone_ok(o.zone) and capacity_ok(o.capacity_type)
            if ok and (best is None or o.price < best):
                best = o.price
        if best is not None:
            out[name] = best
    return out


def fill_costs_from_catalog(
    node_claims: list[dict[str, Any]], offerings: Mapping[str, Sequence[Offering]]
) -> None:
    """Where the result carries no price, price a NodeClaim by its cheapest instance type at
    the offerings (by instance type) its requirements allow."""
    for nc in node_claims:
        if nc.get("cost", {}).get("price") is not None:
            continue
        prices = allowed_prices(offerings, nc.get("requirements"), nc.get("instanceTypes"))
        options = [(prices[it], it) for it in nc.get("instanceTypes") or [] if it in prices]
        if options:
            price, it = min(options)
            nc["cost"] = {"price": price, "instanceType": it}


def devices_by_claim(
    pods: list[dict[str, Any]], names: set[str] | None = None
) -> dict[str, list[dict[str, Any]]]:
    """Every device held per NodeClaim (of ``names`` when given: the page's), as (pod, claim,
    device entry), for the NodeClaims tab: a NodeClaim's devices are its pods'."""
    held: dict[str, list[dict[str, Any]]] = {}
    for pod in pods:
        target = pod.get("target") or {}
        if target.get("kind") != "NodeClaim":
            continue
        if names is not None and target.get("name") not in names:
            continue
        for claim in pod.get("claims") or []:
            for device in claim.get("devices") or []:
                held.setdefault(target.get("name") or "", []).append(
                    {"pod": pod.get("pod"), "claim": claim.get("claim"), **device}
                )
    return held


# Instance types named in a row of devices or templates alike; the others are counted.
INSTANCE_TYPES_NAMED = 3


def grouped_devices(devices: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Device entries (``claims[].devices``, a NodeClaim's held devices) with the entries of
    one template device on several instance types as one row: a claim on a NodeClaim of 400
    instance types lists its device once per type, each in that type's pool. A row is the
    first entry with ``instanceTypes`` (every type, in order), ``instanceTypesShown`` (the
    first few, joined) and ``pools`` (how many pools its entries name)."""
    rows: dict[bytes, dict[str, Any]] = {}
    for d in devices:
        alike = d.get("source") == "template" and d.get("instanceType")
        same = {k: v for k, v in d.items() if k not in ("pool", "instanceType")} if alike else d
        key = _content_key(same)
        row = rows.get(key)
        if row is None:
            row = rows[key] = {**d, "instanceTypes": [], "_pools": set()}
        if d.get("instanceType"):
            row["instanceTypes"].append(d["instanceType"])
        row["_pools"].add(d.get("pool"))
    out = []
    for row in rows.values():
        row["instanceTypesShown"] = _first_named(row["instanceTypes"])
        row["pools"] = len(row.pop("_pools"))
        out.append(row)
    return out


def _content_key(value: Any) -> bytes:
    """Equal for equal JSON content, whatever the order of keys (grouping rows)."""
    return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def _first_named(names: list[str]) -> str:
    """``a, b, c and 397 more``: the first few instance types named, the others counted."""
    shown = ", ".join(names[:INSTANCE_TYPES_NAMED])
    if len(names) > INSTANCE_TYPES_NAMED:
        shown += f" and {len(names) - INSTANCE_TYPES_NAMED} more"
    return shown


def template_groups(templates: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``templateSlices`` entries of instance types that launch with the same devices (the
    same drivers, device names and attributes; each type names its own pools) as one group:
    ``instanceTypes`` (in order), ``instanceTypesShown`` and the first one's ``slices``."""
    groups: dict[bytes, dict[str, Any]] = {}
    for t in templates:
        slices = t.get("slices") or []
        key = _content_key(
            [(s.get("driver"), s.get("devices")) for s in slices if isinstance(s, dict)]
        )
        group = groups.get(key)
        if group is None:
            group = groups[key] = {"slices": slices, "instanceTypes": []}
        group["instanceTypes"].append(t.get("instanceType"))
    for group in groups.values():
        group["instanceTypesShown"] = _first_named([str(it) for it in group["instanceTypes"]])
    return list(groups.values())


def option_changes(a: dict[str, Any] | None, b: dict[str, Any] | None) -> list[str]:
    """How two runs' options differ, in words: ``DRADeviceTaints on → off``, ``disrupt ...``."""
    a, b = a or {}, b or {}
    out = []
    gates_a, gates_b = a.get("featureGates") or {}, b.get("featureGates") or {}
    for gate in sorted(set(gates_a) | set(gates_b)):
        va, vb = gates_a.get(gate, True), gates_b.get(gate, True)
        if va != vb:
            out.append(f"{gate} {'on' if va else 'off'} → {'on' if vb else 'off'}")
    for key in sorted((set(a) | set(b)) - {"featureGates"}):
        if a.get(key) != b.get(key):
            out.append(f"{key} {a.get(key)!r} → {b.get(key)!r}")
    return out


def device_conditions(pods: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Across every placement: devices chosen despite a taint (tolerated), devices whose
    binding waits on conditions or pins the node, and devices a taint kept from a claim (from
    the claims' ``deviceTaints``), with the pod and target they serve."""
    tolerated, binding, excluded = [], [], []
    for pod in pods:
        target = target_text(pod.get("target"))
        for claim in pod.get("claims") or []:
            # The result's own account (allocator/scheduling/report.py), when it has one.
            for x in (claim.get("deviceTaints") or {}).get("excluded") or []:
                excluded.append(
                    {"pod": pod.get("pod"), "target": target, "claim": claim.get("claim"), **x}
                )
            for d in claim.get("devices") or []:
                tolerates = d.get("tolerations")
                binds = (
                    d.get("bindingConditions")
                    or d.get("bindsToNode")
                    or d.get("bindingFailureConditions")
                )
                if not tolerates and not binds:
                    continue  # most devices: a result of 400 instance types lists 70,000
                entry = {"pod": pod.get("pod"), "target": target, "claim": claim.get("claim"), **d}
                if tolerates:
                    tolerated.append(entry)
                if binds:
                    entry["bindingTimeoutSeconds"] = claim.get("bindingTimeoutSeconds")
                    binding.append(entry)
    return {"tolerated": tolerated, "binding": binding, "excluded": excluded}


# --- bounded reasons: one row per (target group, reason), not one per target ---------------

REASON_EXAMPLES = 5


def reason_groups(
    reasons: list[dict[str, Any]], node_claims: Collection[str] = ()
) -> list[dict[str, Any]]:
    """Targets that refused a pod the same way, as one row each: ``{group, reason, phrase,
    count, examples}``; nodes first, then NodeClaims, then NodePools, larger groups first.

    Entries already aggregated by the scheduler (``targets``/``exampleTargets``, as
    docs/RESULT.md allows) count for their ``targets``; so a pod refused by 1,000 nodes for one reason is
    one row whatever the result's form."""
    order = {"nodes": 0, "NodeClaims": 1, "NodePools": 2}
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for entry in reasons or []:
        target = entry.get("target") or ""
        group = target_group(target, node_claims)
        reason = entry.get("reason") or ""
        row = groups.get((group, reason))
        if row is None:
            row = groups[(group, reason)] = {
                "group": group,
                "reason": reason,
                "phrase": reason_phrase(reason),
                "count": 0,
                "examples": [],
            }
        count = entry.get("targets")
        row["count"] += count if isinstance(count, int) and count > 0 else 1
        examples = entry.get("exampleTargets") or [target]
        for example in examples:
            if len(row["examples"]) >= REASON_EXAMPLES:
                break
            example = target_name(example, node_claims)
            if example and example not in row["examples"]:
                row["examples"].append(example)
    for row in groups.values():
        row["more"] = max(0, row["count"] - len(row["examples"]))
    return sorted(groups.values(), key=lambda r: (order[r["group"]], -r["count"], r["reason"]))


def target_count(reasons: list[dict[str, Any]]) -> int:
    """How many targets ``reasons`` stands for (aggregated entries count for their targets)."""
    total = 0
    for entry in reasons or []:
        count = entry.get("targets")
        total += count if isinstance(count, int) and count > 0 else 1
    return total


# --- the refusal funnel (docs/RESULT.md, pods[].explanation) ----------------------------


def pool_anchor(driver: str, pool: str) -> str:
    """The id of a pool's row on the Pools tab (the template's ``pool-<driver>-<pool>``)."""
    return "pool-" + _anchor(driver) + "-" + _anchor(pool)


def pool_device_anchor(device: str | None) -> str:
    """A device's part of its row id on the Pools tab: ``pool-<driver>-<pool>.<device>``."""
    return _anchor(device or "")


def _anchor(key: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]+", "-", key or "").strip("-")


def funnel_view(
    explanation: list[dict[str, Any]] | None, pool_href: dict[tuple[str, str], str] | None = None
) -> list[dict[str, Any]]:
    """Each funnel of a failed pod as the page shows it: a heading (claim, request, how many
    targets refused it this way) and one row per rejection reason, largest first, with its
    example devices linked to their row on the Pools tab (``pool_href`` maps (driver, pool) to
    the URL of the pool's row, ``#pool-DRIVER-POOL``; a device's is that plus ``.DEVICE``, the
    dot being the one character anchors never hold; devices of instance type templates have no
    pool row and stay plain)."""
    pool_href = pool_href or {}
    out: list[dict[str, Any]] = []
    tables: dict[tuple, dict[str, Any]] = {}
    for funnel in explanation or []:
        if not isinstance(funnel, dict):
            continue
        rows = []
        for r in funnel.get("rejections") or []:
            if not isinstance(r, dict):
                continue
            devices = []
            for ref in r.get("exampleDevices") or []:
                driver, _, rest = str(ref).partition("/")
                pool, _, device = rest.rpartition("/")
                href = pool_href.get((driver, pool))
                if href:  # the device's own row: static/js/app.js opens the pool at it
                    href = f"{href}.{pool_device_anchor(device)}"
                devices.append({"text": ref, "href": href, "device": device if href else ""})
            detail = r.get("detail") if isinstance(r.get("detail"), dict) else {}
            message = r.get("message") or ""
            expression = detail.get("expression") or ""
            rows.append(
                {
                    "reason": r.get("reason") or "",
                    "devices": r.get("devices") or 0,
                    "message": message,
                    # Shown apart only when the message does not already quote it.
                    "expression": "" if expression in message else expression,
                    "source": detail.get("source") or "",
                    "examples": devices,
                    "detail": detail,
                }
            )
        rows.sort(key=lambda r: -r["devices"] if isinstance(r["devices"], int) else 0)
        same = _same_table(funnel, rows)
        seen = tables.get(same)
        if seen is not None:  # the same table again (another instance type): one line, counted
            seen["repeats"] += 1
            if funnel.get("instanceType") and len(seen["repeatedFor"]) < REASON_EXAMPLES:
                seen["repeatedFor"].append(funnel["instanceType"])
            continue
        tables[same] = view = {
            "repeats": 1,
            "repeatedFor": [],
        }
        out.append(view)
        view.update(
            {
                "claim": funnel.get("claim") or "",
                "request": funnel.get("request") or "",
                "needed": funnel.get("needed"),
                "instanceType": funnel.get("instanceType"),
                "targets": funnel.get("targets"),
                "exampleTargets": funnel.get("exampleTargets") or [],
                "candidates": funnel.get("candidates"),
                "usable": funnel.get("usable"),
                "message": funnel.get("message") or funnel.get("whole") or "",
                "rows": rows,
                "decisive": rows[0]["reason"] if rows else "",
            }
        )
    return out


def _same_table(funnel: dict[str, Any], rows: list[dict[str, Any]]) -> tuple:
    """What a funnel's table shows, without its instance type: tables equal in all else are
    shown once with a count."""
    return (
        funnel.get("claim"),
        funnel.get("request"),
        funnel.get("needed"),
        funnel.get("candidates"),
        funnel.get("usable"),
        funnel.get("message") or "",
        tuple((r["reason"], r["devices"], r["message"]) for r in rows),
    )


def pool_links(
    pools: list[dict[str, Any]], base: str = "", per_page: int = 50, current_page: int = 1
) -> dict[tuple[str, str], str]:
    """(driver, pool) -> the URL of its row on the (paginated) Pools tab: ``#pool-...`` on the
    page being shown, ``<base>?olpage=N#pool-...`` on another page or from another page."""
    out = {}
    for i, p in enumerate(pools or []):
        page = i // per_page + 1
        key = (p.get("driver") or "", p.get("pool") or "")
        frag = "#" + pool_anchor(*key)
        out[key] = frag if (page == current_page and not base) else f"{base}?olpage={page}{frag}"
    return out


# --- suggestions (docs/RESULT.md, pods[].suggestions) ------------------------------------

_FIELD_PART = re.compile(r"^(?P<name>[^\[\]]+)(?:\[(?P<index>\d+)\])?$")


def _object_ref(ref: str) -> tuple[str, str | None, str]:
    """``"ResourceClaim default/train-0-gpu"`` -> (kind, namespace, name); cluster-scoped
    objects (``"NodePool gpu"``) have no namespace."""
    kind, _, key = (ref or "").strip().partition(" ")
    namespace, sep, name = key.partition("/")
    return (kind, namespace, name) if sep else (kind, None, key)


def _dump(value: Any, indent: int) -> list[str]:
    import yaml

    text = yaml.safe_dump(value, sort_keys=False, default_flow_style=False, width=100)
    return [" " * indent + line for line in text.rstrip("\n").split("\n")]


def _scalar(value: Any) -> str | None:
    """The one-line YAML of a scalar, None for a mapping or list."""
    import yaml

    if isinstance(value, dict | list):
        return None
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("...").strip()


def set_patch_yaml(obj: str, field: str, value: Any) -> str:
    """An ``op: set`` change as the object's header and the field path set to the value, the
    way one would write it in the object's YAML (a list index as ``- # [i]``)."""
    kind, namespace, name = _object_ref(obj)
    lines = [f"kind: {kind}", "metadata:", f"  name: {name}"]
    if namespace:
        lines.append(f"  namespace: {namespace}")
    parts = [p for p in (field or "").split(".") if p]
    indent = 0
    for i, part in enumerate(parts):
        m = _FIELD_PART.match(part)
        key, index = (m.group("name"), m.group("index")) if m else (part, None)
        last = i == len(parts) - 1
        pad = " " * indent
        if last and index is None:
            scalar = _scalar(value)
            if scalar is not None:
                lines.append(f"{pad}{key}: {scalar}")
            elif value in ([], {}):
                lines.append(f"{pad}{key}: {'[]' if value == [] else '{}'}")
            else:
                lines.append(f"{pad}{key}:")
                lines.extend(_dump(value, indent + 2 if isinstance(value, dict) else indent))
            break
        lines.append(f"{pad}{key}:")
        if index is not None:
            lines.append(f"{pad}- # [{index}]")
            indent += 2
            if last:
                scalar = _scalar(value)
                lines[-1] = f"{pad}- {scalar}  # [{index}]" if scalar is not None else lines[-1]
                if scalar is None:
                    lines.extend(_dump(value, indent))
                break
        else:
            indent += 2
    return "\n".join(lines) + "\n"


def delete_commands(objects: list[str]) -> str:
    """``op: delete``: the kubectl lines that remove the objects (the way ``--disrupt``
    frees the devices they hold)."""
    lines = []
    for ref in objects:
        kind, namespace, name = _object_ref(ref)
        ns = f" -n {namespace}" if namespace else ""
        lines.append(f"kubectl delete {kind.lower() or 'pod'}{ns} {name}")
    return "\n".join(lines) + ("\n" if lines else "")


def suggestion_target_text(target: dict[str, Any] | None, node_claims: Collection[str]) -> str:
    """Where a suggestion would place the pod. A new NodeClaim the run itself does not create
    exists only in the changed simulation: its name is not passed off as one of this run's."""
    if (
        target
        and target.get("new")
        and target.get("kind") == "NodeClaim"
        and target.get("name") not in node_claims
    ):
        return f"a new NodeClaim ({target.get('name')} in the run with this change)"
    return target_text(target)


def suggestion_view(
    suggestions: list[dict[str, Any]] | None, node_claims: Collection[str] | None = None
) -> list[dict[str, Any]]:
    """Each suggestion with its change as a copyable patch (YAML for ``set``, kubectl lines
    for ``delete``) and its target in words (``node_claims``: the names of the run's new
    NodeClaims)."""
    out = []
    for s in suggestions or []:
        if not isinstance(s, dict):
            continue
        change = s.get("change") or {}
        op = change.get("op") or "set"
        if op == "delete":
            objects = change.get("objects") or [change.get("object")]
            patch = delete_commands([o for o in objects if o])
            language = "shell"
        elif isinstance(s.get("patch"), list):
            patch = kubectl_patch_text(s)
            language = "shell"
        else:
            patch = set_patch_yaml(
                change.get("object") or "", change.get("field") or "", change.get("value")
            )
            language = "yaml"
        edits = what_if_edits(s)
        out.append(
            {
                "kind": s.get("kind") or "",
                "message": s.get("message") or "",
                "op": op,
                "object": change.get("object") or "",
                "field": change.get("field") or "",
                "patch": patch,
                "language": language,
                "target": suggestion_target_text(s.get("target"), node_claims or ()),
                "recreate": bool(s.get("recreate")),
                "workload": s.get("workload") or "",
                "recreate_steps": [str(x) for x in s.get("recreateSteps") or []],
                "edits_json": json.dumps(edits) if edits else "",
            }
        )
    return out


def _changes(s: dict[str, Any]) -> list[dict[str, Any]]:
    """The entries of a suggestion that each carry one change and its patch (``changes`` of a
    two-change suggestion, else the suggestion itself)."""
    changes = s.get("changes")
    return [c for c in changes if isinstance(c, dict)] if isinstance(changes, list) else [s]


def _change_of(entry: dict[str, Any]) -> dict[str, Any]:
    inner = entry.get("change")
    return inner if isinstance(inner, dict) else entry


def what_if_edits(s: dict[str, Any]) -> list[dict[str, Any]]:
    """A suggestion as the edits of a what-if (``POST /api/snapshots/{id}/variants/``): its
    patches, or the deletion of the objects it deletes; [] when it has neither."""
    edits: list[dict[str, Any]] = []
    for entry in _changes(s):
        change = _change_of(entry)
        if change.get("op") == "delete":
            objects = change.get("objects") or [change.get("object")]
            edits.extend({"object": o, "delete": True} for o in objects if isinstance(o, str))
        elif isinstance(entry.get("patches"), list) or isinstance(entry.get("patch"), list):
            each = [
                {"object": e["object"], "patch": e["patch"]}
                for e in object_patches(entry, change)
                if isinstance(e.get("object"), str) and isinstance(e.get("patch"), list)
            ]
            if not each:
                return []
            edits.extend(each)
        else:
            return []
    return edits


def kubectl_patch_text(s: dict[str, Any]) -> str:
    """The ``kubectl patch --type json`` line of each change (the patch alone, for the saved
    manifest, when the object must be recreated)."""
    lines = []
    for entry in _changes(s):
        change = _change_of(entry)
        for one in object_patches(entry, change):
            patch = one.get("patch") if isinstance(one, dict) else None
            if not isinstance(patch, list):
                continue
            kind, namespace, name = _object_ref(str(one.get("object") or ""))
            body = json.dumps(patch, separators=(",", ":"))
            if entry.get("recreate"):
                lines.append(f"# {kind} {name}: patch of its saved manifest (it is recreated)")
                lines.append(body)
            else:
                ns = f" -n {namespace}" if namespace else ""
                lines.append(f"kubectl patch {kind.lower()}{ns} {name} --type json -p '{body}'")
    return "\n".join(lines) + ("\n" if lines else "")


# --- downloads: each new NodeClaim as Karpenter would create it -------------------------------


# Requirement keys Karpenter keeps off a NodeClaim (the hostname is dropped when scheduling is
# finalised; registered/initialized exist only for the DaemonSet simulation).
_NOT_ON_NODE_CLAIM = {
    "kubernetes.io/hostname",
    "karpenter.sh/registered",
    "karpenter.sh/initialized",
}
# Label domains of well-known labels (Kubernetes', Karpenter's and its cloud providers'): not
# resolved into NodeClaim labels from requirements.
_WELL_KNOWN_DOMAINS = ("kubernetes.io", "k8s.io", "karpenter.sh", "karpenter.k8s.aws")


def _well_known(key: str) -> bool:
    domain = key.partition("/")[0] if "/" in key else ""
    return any(domain == d or domain.endswith("." + d) for d in _WELL_KNOWN_DOMAINS)


def node_claim_manifest(
    nc: dict[str, Any],
    node_pool_raw: dict[str, Any] | None,
    requests: dict[str, str] | None = None,
) -> dict:
    """A NodeClaim of the result as the ``karpenter.sh/v1`` object Karpenter would create from
    its NodePool (NodeClaimTemplate.ToNodeClaim): the template's labels, ``karpenter.sh/nodepool``
    and the node class label (``group/kind: name``), custom labels a requirement fixes to one
    value; the template's annotations and the run's (``karpenter.sh/requested-dra-drivers``);
    an owner reference to the NodePool (when its uid is known); the requirements the run computed (without the
    hostname); ``resources.requests`` (its pods and the DaemonSet overhead, ``requests``); the
    template's nodeClassRef, taints, startupTaints, expireAfter and terminationGracePeriod."""
    pool_raw = node_pool_raw or {}
    template = (pool_raw.get("spec") or {}).get("template") or {}
    tmeta = template.get("metadata") or {}
    tspec = template.get("spec") or {}
    pool = nc.get("nodePool") or ""
    labels = {**(tmeta.get("labels") or {}), "karpenter.sh/nodepool": pool}
    ref = tspec.get("nodeClassRef") or {}
    if ref.get("kind") and ref.get("name"):
        labels[f"{ref.get('group') or ''}/{str(ref['kind']).lower()}".lstrip("/")] = ref["name"]
    requirements = [
        r
        for r in nc.get("requirements") or []
        if isinstance(r, dict) and r.get("key") not in _NOT_ON_NODE_CLAIM
    ]
    for r in requirements:
        key, values = str(r.get("key") or ""), r.get("values") or []
        if r.get("operator") == "In" and len(values) == 1 and not _well_known(key):
            labels.setdefault(key, values[0])
    annotations = {**(tmeta.get("annotations") or {}), **(nc.get("annotations") or {})}
    spec: dict[str, Any] = {}
    for key in ("taints", "startupTaints"):
        if tspec.get(key):
            spec[key] = tspec[key]
    spec["requirements"] = [
        {
            "key": r.get("key"),
            "operator": r.get("operator"),
            **({"values": list(r["values"])} if r.get("values") else {}),
            **({"minValues": r["minValues"]} if r.get("minValues") else {}),
        }
        for r in requirements
    ]
    if requests:
        spec["resources"] = {"requests": dict(requests)}
    if ref:
        spec["nodeClassRef"] = ref
    for key in ("expireAfter", "terminationGracePeriod"):
        if tspec.get(key):
            spec[key] = tspec[key]
    metadata: dict[str, Any] = {
        "name": nc.get("name") or "",
        "labels": dict(sorted(labels.items())),
        "annotations": dict(sorted(annotations.items())),
    }
    uid = (pool_raw.get("metadata") or {}).get("uid")
    if uid:  # an owner reference needs the NodePool's uid (an export without it gets none)
        metadata["ownerReferences"] = [
            {
                "apiVersion": "karpenter.sh/v1",
                "kind": "NodePool",
                "name": pool,
                "uid": uid,
                "blockOwnerDeletion": True,
            }
        ]
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": metadata,
        "spec": spec,
    }


def manifests_yaml(manifests: list[dict]) -> str:
    import yaml

    return "---\n".join(
        yaml.safe_dump(m, sort_keys=False, default_flow_style=False, width=100) for m in manifests
    )


# --- object YAML as kubectl shows it -----------------------------------------------------------


def without_managed_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The object without ``metadata.managedFields`` (kubectl hides them by default)."""
    meta = raw.get("metadata")
    if not isinstance(meta, dict) or "managedFields" not in meta:
        return raw
    return {**raw, "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}


def instance_types_by_price(
    names: list[str] | None, prices: dict[str, float]
) -> list[dict[str, Any]]:
    """A NodeClaim's instance types, cheapest offering first (unpriced last, by name), the
    cheapest marked: the one Karpenter launches when every offering is available."""
    rows = [{"name": n, "price": prices.get(n), "cheapest": False} for n in names or []]
    rows.sort(key=lambda r: (r["price"] is None, r["price"] or 0.0, r["name"]))
    if rows and rows[0]["price"] is not None:
        low = rows[0]["price"]
        for r in rows:
            r["cheapest"] = r["price"] == low
    return rows


def pruned_groups(pruned: list[Any] | None) -> list[dict[str, Any]]:
    """A NodeClaim's pruned instance types grouped by why (reason, message and the pod being
    placed), in the order each reason first appears: a hundred instance types that refused the
    same requests are one row naming them, not a hundred rows repeating the message."""
    groups: dict[tuple[str, str, str], dict[str, Any]] = {}
    for entry in pruned or []:
        if isinstance(entry, dict):
            name = entry.get("name") or entry.get("instanceType") or ""
            key = (
                str(entry.get("reason") or ""),
                str(entry.get("message") or ""),
                str(entry.get("pod") or ""),
            )
        else:
            name, key = entry, ("", "", "")
        group = groups.get(key)
        if group is None:
            group = groups[key] = {
                "reason": key[0],
                "message": key[1],
                "pod": key[2],
                "names": [],
            }
        group["names"].append(str(name))
    return list(groups.values())


# --- the diff, by cause ------------------------------------------------------------------------


def _outcome_text(node: dict[str, Any] | None) -> str:
    if not node:
        return "absent"
    status = node.get("status") or "ok"
    return f"{status} ({node['reason']})" if node.get("reason") else status


def divergence_causes(divergences: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The trace diff's divergence points grouped by what changed: (kind of node, outcome in
    A, outcome in B). One disrupted node moves many pods the same way; they read as one
    cause with a count, not dozens of rows."""
    groups: dict[tuple, dict[str, Any]] = {}
    for d in divergences or []:
        node = d.get("a") or d.get("b") or {}
        kind = node.get("kind") or ""
        if d.get("type") == "onlyInA":
            a, b = _outcome_text(d.get("a")), "not tried"
        elif d.get("type") == "onlyInB":
            a, b = "not tried", _outcome_text(d.get("b"))
        else:
            a, b = _outcome_text(d.get("a")), _outcome_text(d.get("b"))
        key = (kind, a, b)
        g = groups.get(key)
        if g is None:
            g = groups[key] = {
                "kind": kind,
                "a": a,
                "b": b,
                "type": d.get("type"),
                "count": 0,
                "subtree": 0,
                "examples": [],
            }
        g["count"] += 1
        g["subtree"] += d.get("subtree") or 0
        if len(g["examples"]) < 10:
            message = (d.get("b") or {}).get("message") or (d.get("a") or {}).get("message")
            path = [_diff_path_label(label) for label in d.get("path") or []]
            g["examples"].append({"path": path, "message": message or ""})
    return sorted(groups.values(), key=lambda g: (-g["subtree"], -g["count"], g["kind"]))


def _diff_path_label(label: str) -> str:
    """A new NodeClaim's attempt without its candidate name: the trace's ``nodepool/gpu (new
    gpu-1)`` names what the NodeClaim would be called, and across two runs ``gpu-1`` may be
    different NodeClaims or none (the tree names it only where it was created)."""
    parsed = parse_new_nodeclaim_label(label)
    return f"nodepool/{parsed[0]} (a new NodeClaim)" if parsed else label


def error_changes(changed: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Pods failed in both runs whose error changed: ``cause`` when the reason's phrase
    changed, ``reworded`` when only the wording did (other node names, counts...)."""
    out: dict[str, list[dict[str, Any]]] = {"cause": [], "reworded": []}
    for x in changed or []:
        pa, pb = reason_phrase(x.get("a")), reason_phrase(x.get("b"))
        entry = {**x, "phraseA": pa, "phraseB": pb}
        out["reworded" if pa == pb else "cause"].append(entry)
    return out


def _funnel_counts(pod: dict[str, Any]) -> dict[tuple[str, str, str], int]:
    counts: dict[tuple[str, str, str], int] = {}
    for f in pod.get("explanation") or []:
        if not isinstance(f, dict):
            continue
        for r in f.get("rejections") or []:
            key = (f.get("claim") or "", f.get("request") or "", r.get("reason") or "")
            devices = r.get("devices") if isinstance(r.get("devices"), int) else 0
            counts[key] = max(counts.get(key, 0), devices)
    return counts


def funnel_diff(
    result_a: dict[str, Any] | None, result_b: dict[str, Any] | None, limit: int = 200
) -> list[dict[str, Any]]:
    """Refused devices by cause, per failed pod's request, in A against B: the rows that
    differ (a cause that appeared, went away, or refused another number of devices)."""
    pods_a = {p.get("pod"): p for p in (result_a or {}).get("pods") or []}
    pods_b = {p.get("pod"): p for p in (result_b or {}).get("pods") or []}
    rows = []
    for name in sorted(set(pods_a) | set(pods_b), key=str):
        ca = _funnel_counts(pods_a.get(name) or {})
        cb = _funnel_counts(pods_b.get(name) or {})
        for key in sorted(set(ca) | set(cb)):
            if ca.get(key) == cb.get(key):
                continue
            claim, request, reason = key
            rows.append(
                {
                    "pod": name,
                    "claim": claim,
                    "request": request,
                    "reason": reason,
                    "a": ca.get(key),
                    "b": cb.get(key),
                }
            )
            if len(rows) >= limit:
                return rows
    return rows


def device_class_rows(device_classes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The snapshot page's DeviceClass table: each class's selectors as CEL text, its extended
    resource name and config (``device_classes``: objects_by_kind entries)."""
    rows = []
    for obj in device_classes:
        spec = obj["raw"].get("spec") or {}
        rows.append(
            {
                "name": obj["name"],
                "selectors": selector_texts(spec.get("selectors")),
                "extendedResourceName": spec.get("extendedResourceName"),
                "config": spec.get("config") or [],
            }
        )
    return rows


# --- feature gates and Kubernetes version presets --------------------------------------------


def gates_view(options: dict[str, Any] | None) -> dict[str, Any]:
    """Which gates a run had (from its options or its result: both carry ``featureGates`` and
    ``kubernetesVersion``): the preset's label, and each gate with its preset default and
    whether the run set it apart from that default."""
    from allocator.featuregates import KUBERNETES_VERSIONS, preset

    options = options or {}
    gates = options.get("featureGates") or {}
    version = options.get("kubernetesVersion")
    known = version in KUBERNETES_VERSIONS
    defaults = preset(version) if known else dict.fromkeys(gates, True)
    if known:
        label = f"Kubernetes {version} defaults"
    else:
        label = (
            "every DRA feature on (no Kubernetes version: a debugger's default, not a cluster's)"
        )
    rows = [
        {
            "name": name,
            "on": on,
            "default": defaults.get(name, True),
            "set": defaults.get(name, True) != on,
        }
        for name, on in gates.items()
    ]
    return {
        "version": version if known else None,
        "label": label,
        "gates": rows,
        "set": [row for row in rows if row["set"]],
        "on": sum(1 for row in rows if row["on"]),
    }


def gate_presets() -> dict[str, Any]:
    """Every gate's default in each release that has a preset: the run form's reference."""
    from allocator.featuregates import GATE_NAMES, KUBERNETES_VERSIONS, preset

    by_version = {v: preset(v) for v in KUBERNETES_VERSIONS}
    return {
        "versions": KUBERNETES_VERSIONS,
        "rows": [
            {"name": name, "defaults": [by_version[v][name] for v in KUBERNETES_VERSIONS]}
            for name in GATE_NAMES
        ],
    }


def version_choices(
    fixed: bool, cluster_version: str | None = None, server_version: str = ""
) -> list[dict[str, str]]:
    """The run form's Kubernetes version options; the first ("auto") leaves it to the snapshot.
    ``fixed``: the form runs one known snapshot, whose runs default to ``cluster_version`` (its
    live-imported server's release, ``server_version`` as the server said it) or to every
    gate on when that is None."""
    from allocator.featuregates import KUBERNETES_VERSIONS

    if not fixed:
        auto = "the snapshot's: a live import's cluster version, else every DRA feature on"
    elif cluster_version:
        auto = f"Kubernetes {cluster_version} defaults (this cluster's version, {server_version})"
    else:
        auto = "every DRA feature on (the snapshot names no Kubernetes version)"
    return [
        {"value": "auto", "label": auto},
        {"value": "all", "label": "every DRA feature on (a debugger's default)"},
        *({"value": v, "label": f"Kubernetes {v} defaults"} for v in KUBERNETES_VERSIONS),
    ]


# --- what-if diffs -------------------------------------------------------------------------------


def input_changes_view(changes: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The edits between the two snapshots of a diff, each with its patch as indented JSON."""
    out = []
    for c in changes or []:
        if not isinstance(c, dict):
            continue
        deleted = c.get("delete") is True
        out.append(
            {
                "object": str(c.get("object") or ""),
                "snapshot": c.get("snapshot"),
                "author": c.get("author") or "",
                "delete": deleted,
                "patch": "" if deleted else json.dumps(c.get("patch") or [], indent=2),
            }
        )
    return out


# --- pools: who holds a device, counters used and left --------------------------------------------


def device_holders(
    claims: Collection[Any], result: dict[str, Any] | None, driver: str, pool: str
) -> dict[str, list[str]]:
    """Device name -> who holds it in this pool: in-cluster claims allocated in the snapshot
    (``claim ns/name`` with the pods it is reserved for) and the pods this run placed on
    in-cluster devices (``pod ns/name (this run)``)."""
    out: dict[str, list[str]] = {}
    for claim in claims:
        allocation = getattr(claim, "allocation", None)
        if allocation is None:
            continue
        pods = [r.name for r in claim.reserved_for if r.resource == "pods"]
        shown = f"claim {claim.key}" + (f" ({', '.join(pods)})" if pods else "")
        for d in allocation.devices:
            ident = d.device_id
            if ident.driver == driver and ident.pool == pool:
                out.setdefault(ident.device, []).append(shown)
    for entry in (result or {}).get("pods") or []:
        if not entry.get("scheduled"):
            continue
        for claim in entry.get("claims") or []:
            if claim.get("state") == "allocated-in-cluster":
                continue  # listed from the snapshot above
            for d in claim.get("devices") or []:
                if (
                    d.get("source") == "in-cluster"
                    and d.get("driver") == driver
                    and d.get("pool") == pool
                ):
                    held = out.setdefault(str(d.get("device")), [])
                    label = f"pod {entry.get('pod')} (this run)"
                    if label not in held:
                        held.append(label)
    return out


def counter_usage(slices: Collection[Any], holders: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Per shared counter of the pool's newest generation: its total, what the held devices
    consume, and what is left (``{counterSet, counter, total, used, left}``; quantities as
    Kubernetes prints them)."""
    totals: dict[tuple[str, str], Quantity] = {}
    used: dict[tuple[str, str], Quantity] = {}
    for s in slices:
        for cs in getattr(s, "shared_counters", None) or []:
            for name, value in (cs.counters or {}).items():
                totals[(cs.name, name)] = totals.get((cs.name, name), Quantity.zero()) + value
    for s in slices:
        for d in s.devices:
            if d.name not in holders:
                continue
            for consumption in getattr(d, "consumes_counters", None) or []:
                for name, value in (consumption.counters or {}).items():
                    key = (consumption.counter_set, name)
                    used[key] = used.get(key, Quantity.zero()) + value
    return [
        {
            "counterSet": key[0],
            "counter": key[1],
            "total": total.canonical(),
            "used": used.get(key, Quantity.zero()).canonical(),
            "left": (total - used.get(key, Quantity.zero())).canonical(),
        }
        for key, total in sorted(totals.items())
    ]
