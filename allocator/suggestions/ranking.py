"""What a suggestion touches (its ``scope``) and the order suggestions are offered in.

A user acts first on what they own: the pod and its own claims, then their namespace, then a
NodePool, the instance types a NodePool buys, objects every workload shares (a DeviceClass),
and last other people's pods. Within that, a change that keeps what the pod asked for (its
hardware, its zone) comes before one that gives it up, and a change that costs another pod its
placement comes after every one that does not.
"""

from __future__ import annotations

SCOPES = ("pod", "namespace", "nodepool", "catalog", "cluster", "other-pods")

# Objects a pod owns or that are made for it alone (a template's claims are the pod's own).
_POD_KINDS = frozenset({"Pod", "ResourceClaim", "ResourceClaimTemplate"})
_SCOPE_OF_KIND = {"Namespace": "namespace", "NodePool": "nodepool"}
# Kinds that widen which catalog instance types a NodePool may buy.
_CATALOG_KINDS = frozenset({"add-instance-type", "instance-type-resources"})

# Within a scope, smaller changes first: a toleration or a port before a count, a count before
# a selector, a selector before a constraint ...
KIND_ORDER = {
    "tolerate-taint": 0,
    "change-host-port": 0,
    "reduce-count": 1,
    "reduce-request": 1,
    "relax-topology": 2,
    "relax-selector": 2,
    "drop-constraint": 3,
    "nodepool-requirement": 4,
    "label-namespace": 4,
    "lower-min-values": 4,
    "nodepool-limit": 5,
    "instance-type-resources": 6,
    "add-instance-type": 6,
    "free-device": 7,
    "two-changes": 8,
}


# Scopes whose edits reach beyond the pod's own workload and its provisioning: ranked after
# every fix that stays within them, whatever the latter gives up.
SHARED_SCOPES = frozenset({"cluster", "other-pods"})


def scope_of(kind: str, change: dict) -> str:
    """The scope of one change (``change`` as in the result: object, field, op, value)."""
    if change.get("op") == "delete":
        return "other-pods"
    if kind in _CATALOG_KINDS:
        return "catalog"
    object_kind = str(change.get("object", "")).partition(" ")[0]
    if object_kind in _POD_KINDS:
        return "pod"
    return _SCOPE_OF_KIND.get(object_kind, "cluster")


def widest(scopes: list[str]) -> str:
    """The scope of several changes applied together: the widest of them."""
    return max(scopes, key=SCOPES.index)


def shared_note(scope: str, change: dict) -> str:
    """The flag a change to a shared object, or to other pods, carries in its message."""
    if scope == "cluster":
        return f"; this edits {change['object']}, shared by every workload that uses it"
    if scope == "other-pods":
        pods = change.get("objects") or [change["object"]]
        return f"; this deletes {len(pods)} running pod(s) of another workload"
    if scope in ("nodepool", "catalog"):
        return f"; this edits {change['object']}, shared by every pod it provisions for"
    return ""


def rank_key(gives_up_ask: bool, scope: str, changes: int, kind: str, found: int) -> tuple:
    """A suggestion's place among the pod's (smaller first): an edit of what every workload
    shares (a DeviceClass, a DeviceTaintRule) or of another workload's pods after every other;
    within each part, one that keeps what the pod asked for (its hardware, its zone) first, then
    by scope, then the fewest objects changed, the smallest kind of change, and the order found.
    The whole-loop check then moves those that cost another pod its placement after all the
    others (``core._on_the_whole_loop``)."""
    shared = scope in SHARED_SCOPES
    return (shared, gives_up_ask, SCOPES.index(scope), changes, KIND_ORDER[kind], found)


def trial_order(kind: str, scope: str, found: int) -> tuple:
    """The order candidates are tried in, so that the trial budget goes to the least invasive
    first (a pod's own change, then its namespace's, a NodePool's ...)."""
    return (SCOPES.index(scope), KIND_ORDER[kind], found)
