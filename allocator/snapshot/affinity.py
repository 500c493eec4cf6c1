"""A pod's topology fields: labels, pod affinity and anti-affinity, preferred node affinity and
topology spread constraints (read by ``allocator/scheduling/topology.py``).

Validated as the API server validates them on create (label selectors, keys and values, enum
fields, weights), so an object kube-apiserver would have refused makes the snapshot unusable
with the field's path; anything it accepts is read.
"""

from __future__ import annotations

from allocator.model import (
    LabelSelector,
    LabelSelectorRequirement,
    PodAffinity,
    PodAffinityTerm,
    PreferredSchedulingTerm,
    TopologySpreadConstraint,
    WeightedPodAffinityTerm,
)
from allocator.snapshot.fields import Context
from allocator.snapshot.names import label_key_problem, label_value_problem

_SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
_POLICIES = ("Honor", "Ignore")
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _label_key(ctx: Context, key: str | None, path: str) -> str | None:
    if key is None:
        return None
    problem = label_key_problem(key)
    if problem is not None:
        ctx.problem(path, problem)
        return None
    return key


def _label_keys(ctx: Context, d: dict, key: str, path: str) -> tuple[str, ...]:
    out = []
    for i, value in enumerate(ctx.strings(d, key, path)):
        if _label_key(ctx, value, f"{path}[{i}]") is not None:
            out.append(value)
    return tuple(out)


def read_label_selector(ctx: Context, d: dict, key: str, path: str) -> LabelSelector | None:
    """A metav1.LabelSelector; None when absent (a term without one selects nothing)."""
    if not isinstance(d, dict) or d.get(key) is None:
        return None
    selector = ctx.map(d, key, path)
    labels = []
    for name, value in ctx.string_map(selector, "matchLabels", f"{path}.matchLabels").items():
        p = f"{path}.matchLabels.{name}"
        if _label_key(ctx, name, p) is None:
            continue
        problem = label_value_problem(value)
        if problem is not None:
            ctx.problem(p, problem)
            continue
        labels.append((name, value))
    expressions = []
    for p, e in ctx.items(selector, "matchExpressions", f"{path}.matchExpressions"):
        k = _label_key(ctx, ctx.str(e, "key", f"{p}.key", required=True), f"{p}.key")
        op = ctx.str(e, "operator", f"{p}.operator", required=True)
        values = ctx.strings(e, "values", f"{p}.values")
        if op is not None and op not in _SELECTOR_OPERATORS:
            ctx.problem(f"{p}.operator", f"must be one of {', '.join(_SELECTOR_OPERATORS)}")
            continue
        if op in ("In", "NotIn") and not values:
            ctx.problem(f"{p}.values", f"must not be empty for operator {op}")
            continue
        if op in ("Exists", "DoesNotExist") and values:
            ctx.problem(f"{p}.values", f"must be empty for operator {op}")
            continue
        bad = [v for v in values if label_value_problem(v) is not None]
        for v in bad:
            ctx.problem(f"{p}.values", label_value_problem(v) or "")
        if k is None or op is None or bad:
            continue
        expressions.append(LabelSelectorRequirement(k, op, values))
    return LabelSelector(tuple(labels), tuple(expressions))


def _affinity_term(ctx: Context, t: dict, path: str) -> PodAffinityTerm | None:
    key = ctx.str(t, "topologyKey", f"{path}.topologyKey", required=True)
    key = _label_key(ctx, key, f"{path}.topologyKey")
    term = PodAffinityTerm(
        topology_key=key or "",
        label_selector=read_label_selector(ctx, t, "labelSelector", f"{path}.labelSelector"),
        namespaces=ctx.strings(t, "namespaces", f"{path}.namespaces"),
        namespace_selector=read_label_selector(
            ctx, t, "namespaceSelector", f"{path}.namespaceSelector"
        ),
        match_label_keys=_label_keys(ctx, t, "matchLabelKeys", f"{path}.matchLabelKeys"),
        mismatch_label_keys=_label_keys(ctx, t, "mismatchLabelKeys", f"{path}.mismatchLabelKeys"),
    )
    return term if key is not None else None


def _weight(ctx: Context, d: dict, path: str) -> int | None:
    if d.get("weight") is None:
        ctx.problem(path, "required")
        return None
    weight = ctx.int(d, "weight", path, minimum=1)
    if weight is not None and weight > 100:
        ctx.problem(path, "must be in the range 1-100")
        return None
    return weight


def _pod_affinity(ctx: Context, affinity: dict, key: str) -> PodAffinity | None:
    path = f"spec.affinity.{key}"
    if affinity.get(key) is None:
        return None
    d = ctx.map(affinity, key, path)
    required = []
    for p, t in ctx.items(d, _REQUIRED, f"{path}.{_REQUIRED}"):
        term = _affinity_term(ctx, t, p)
        if term is not None:
            required.append(term)
    preferred = []
    for p, w in ctx.items(d, _PREFERRED, f"{path}.{_PREFERRED}"):
        weight = _weight(ctx, w, f"{p}.weight")
        inner = ctx.map(w, "podAffinityTerm", f"{p}.podAffinityTerm", required=True)
        term = _affinity_term(ctx, inner, f"{p}.podAffinityTerm") if inner else None
        if weight is not None and term is not None:
            preferred.append(WeightedPodAffinityTerm(weight, term))
    return PodAffinity(tuple(required), tuple(preferred))


def _preferred_node_affinity(ctx: Context, affinity: dict) -> tuple[PreferredSchedulingTerm, ...]:
    node_affinity = affinity.get("nodeAffinity")
    if not isinstance(node_affinity, dict):
        return ()  # its shape is reported with the required terms (core.py)
    path = f"spec.affinity.nodeAffinity.{_PREFERRED}"
    out = []
    for p, w in ctx.items(node_affinity, _PREFERRED, path):
        weight = _weight(ctx, w, f"{p}.weight")
        term = ctx.map(w, "preference", f"{p}.preference", required=True)
        before = len(ctx.problems)
        ctx.node_selector_requirements(term, "matchExpressions", f"{p}.preference.matchExpressions")
        for fp, f in ctx.items(term, "matchFields", f"{p}.preference.matchFields"):
            if f.get("key") != "metadata.name":
                ctx.problem(f"{fp}.key", "only metadata.name is supported")
        ctx.node_selector_requirements(term, "matchFields", f"{p}.preference.matchFields")
        if weight is not None and len(ctx.problems) == before:
            out.append(PreferredSchedulingTerm(weight, term))
    return tuple(out)


def _spread_constraint(ctx: Context, c: dict, path: str) -> TopologySpreadConstraint | None:
    if c.get("maxSkew") is None:
        ctx.problem(f"{path}.maxSkew", "required")
    max_skew = ctx.int(c, "maxSkew", f"{path}.maxSkew", minimum=1)
    key = ctx.str(c, "topologyKey", f"{path}.topologyKey", required=True)
    key = _label_key(ctx, key, f"{path}.topologyKey")
    when = ctx.str(c, "whenUnsatisfiable", f"{path}.whenUnsatisfiable", required=True)
    if when is not None and when not in _WHEN_UNSATISFIABLE:
        ctx.problem(f"{path}.whenUnsatisfiable", f"must be one of {', '.join(_WHEN_UNSATISFIABLE)}")
        when = None
    min_domains = ctx.int(c, "minDomains", f"{path}.minDomains", minimum=1)
    if min_domains is not None and when == "ScheduleAnyway":
        ctx.problem(f"{path}.minDomains", "can only be set when whenUnsatisfiable is DoNotSchedule")
    policies = []
    for field in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
        value = ctx.str(c, field, f"{path}.{field}")
        if value is not None and value not in _POLICIES:
            ctx.problem(f"{path}.{field}", f"must be one of {', '.join(_POLICIES)}")
            value = None
        policies.append(value)
    selector = read_label_selector(ctx, c, "labelSelector", f"{path}.labelSelector")
    match_label_keys = _label_keys(ctx, c, "matchLabelKeys", f"{path}.matchLabelKeys")
    if match_label_keys and selector is None:
        ctx.problem(f"{path}.matchLabelKeys", "must not be set when labelSelector is not set")
    if max_skew is None or key is None or when is None:
        return None
    return TopologySpreadConstraint(
        max_skew=max_skew,
        topology_key=key,
        when_unsatisfiable=when,
        label_selector=selector,
        min_domains=min_domains,
        node_affinity_policy=policies[0],
        node_taints_policy=policies[1],
        match_label_keys=match_label_keys,
    )


def _affinity(spec: dict) -> dict:
    affinity = spec.get("affinity")
    return affinity if isinstance(affinity, dict) else {}  # its shape is reported by core.py


def read_pod_affinity(ctx: Context, spec: dict, key: str) -> PodAffinity | None:
    """``spec.affinity.podAffinity`` (key ``podAffinity``) or ``podAntiAffinity``."""
    return _pod_affinity(ctx, _affinity(spec), key)


def read_preferred_node_affinity(ctx: Context, spec: dict) -> tuple[PreferredSchedulingTerm, ...]:
    return _preferred_node_affinity(ctx, _affinity(spec))


def read_spread_constraints(ctx: Context, spec: dict) -> tuple[TopologySpreadConstraint, ...]:
    out = []
    for p, c in ctx.items(spec, "topologySpreadConstraints", "spec.topologySpreadConstraints"):
        constraint = _spread_constraint(ctx, c, p)
        if constraint is not None:
            out.append(constraint)
    return tuple(out)
