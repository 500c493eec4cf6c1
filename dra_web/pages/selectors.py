"""Reads the pages need beyond the snapshots and runs selectors (read-only, no writes).

A run's page reads the facts its worker derived from the snapshot when it stored the run
(``runs.page_facts``). What is loaded on demand (a pool's devices, a search tree node's device,
the NodeClaim manifests) reads the typed snapshot, parsed once per process and snapshot
(snapshots are immutable).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

import yaml

from allocator.edits import EditError, index_documents, patch_between
from dra_web.pages import presenters
from dra_web.runs import selectors as run_selectors
from dra_web.runs.page_facts import (
    PageFacts,
    claim_intent,
    claim_specs,
    derive,
    device_view,
    newest_slices,
    pool_access,
)
from dra_web.snapshots.services import load_snapshot

_CACHE_SIZE = 6
_lock = threading.Lock()
_models: OrderedDict[tuple[int, str], Any] = OrderedDict()
_specs: OrderedDict[tuple[int, str], Any] = OrderedDict()
_facts: OrderedDict[tuple[int, str], PageFacts] = OrderedDict()


def _remember(cache: OrderedDict, key, build, kept: int = _CACHE_SIZE):
    """``cache[key]``, built the first time; the ``kept`` most recently used entries stay."""
    with _lock:
        if key in cache:
            cache.move_to_end(key)
            return cache[key]
    value = build()
    with _lock:
        cache[key] = value
        while len(cache) > kept:
            cache.popitem(last=False)
    return value


def snapshot_model(snapshot):
    """The snapshot as ``allocator.model.Snapshot``; None when it no longer loads."""

    def build():
        try:
            return load_snapshot(snapshot)
        except Exception:  # a stored snapshot that the current loader rejects: show raw only
            return None

    # Keyed by content too: a database reset (tests) may reuse ids for other snapshots.
    return _remember(_models, (snapshot.pk, snapshot.content_hash), build)


def node_names(snapshot) -> list[str]:
    """The snapshot's nodes, sorted (what a run may disrupt); none when it no longer loads."""
    model = snapshot_model(snapshot)
    return sorted(model.nodes) if model is not None else []


def run_facts(run) -> PageFacts:
    """The snapshot facts of a finished run's page: those stored with the run, else (a run
    stored before they were) derived from the typed snapshot once per process and run."""
    stored = run_selectors.page_facts(run)
    if stored is not None:
        return stored
    return _remember(
        _facts,
        (run.pk, str(run.finished_at)),
        lambda: derive(snapshot_model(run.snapshot), run.result or {}),
    )


# --- claims: the intent beside the decision ------------------------------------------------


def snapshot_claim_specs(snapshot) -> dict[str, Any]:
    """``claim_specs`` of a stored snapshot, once per process and snapshot: from the typed
    snapshot's documents when it loads (no second decompress and decode of the stored
    documents: most of a warm run page's time on a 1,000-node cluster), else the stored ones."""

    def build():
        model = snapshot_model(snapshot)
        return claim_specs(model.documents if model is not None else snapshot.documents())

    return _remember(_specs, (snapshot.pk, snapshot.content_hash), build)


# --- devices: template slices and pools ----------------------------------------------------


def pool_view(model, driver: str, pool: str) -> dict[str, Any]:
    """An in-cluster pool's newest generation: its devices (with their slice), how many
    slices were seen, and which nodes can reach it."""
    empty = {"devices": [], "slicesSeen": 0, "access": ""}
    if model is None:
        return empty
    slices = pool_slices(model, driver, pool)
    if not slices:
        return empty
    current = newest_slices(slices)
    devices = [{"slice": s.name, **device_view(d)} for s in current for d in s.devices]
    return {"devices": devices, "slicesSeen": len(current), "access": pool_access(current)}


def _find_device(slices, driver: str, pool: str, device: str):
    """The named device in any of ``slices`` (slices or templates) of that driver and pool."""
    for s in slices:
        if s.driver == driver and s.pool == pool:
            for d in s.devices:
                if d.name == device:
                    return d
    return None


def device_info(model, driver: str, pool: str, device: str) -> dict[str, Any] | None:
    """A device tried by the DFS: in-cluster first, then instance type templates."""
    if model is None:
        return None
    found = _find_device(model.resource_slices, driver, pool, device)
    if found is not None:
        return {"driver": driver, "pool": pool, "source": "in-cluster", **device_view(found)}
    for it in model.instance_types.values():
        found = _find_device(it.resource_slice_templates, driver, pool, device)
        if found is not None:
            return {
                "driver": driver,
                "pool": pool,
                "source": "template",
                "instanceType": it.name,
                **device_view(found),
            }
    return None


# --- a search tree node with what the snapshot says about it ---------------------------------


def trace_node_detail(run, node_id: int) -> dict[str, Any] | None:
    """A trace node with its path, the device it tried (from the snapshot) and what its claim
    asked for (the claim is the node itself or an ancestor)."""
    node = run_selectors.trace_node(run, node_id)
    if node is None:
        return None
    if node.get("driver") and node.get("pool") and node.get("device"):
        model = snapshot_model(run.snapshot)
        node["device_info"] = device_info(model, node["driver"], node["pool"], node["device"])
    chain = [*node.get("path", []), node]
    claim = next((n for n in reversed(chain) if n.get("kind") == "claim"), None)
    pod = next((n for n in chain if n.get("kind") == "pod"), None)
    if claim and pod:
        intent = claim_intent(snapshot_claim_specs(run.snapshot), pod["label"], claim["label"])
        if intent["found"]:
            node["intent"] = {"claim": claim["label"], **intent}
    return node


# --- NodeClaims, downloads and indexes ---------------------------------------------------------


def node_pool_documents(snapshot) -> dict[str, dict]:
    """The snapshot's NodePools as uploaded, by name (for the NodeClaim manifests)."""
    model = snapshot_model(snapshot)
    if model is not None:
        return {name: np.raw for name, np in model.node_pools.items()}
    return {
        (raw.get("metadata") or {}).get("name"): raw
        for kind, raw in snapshot.documents()
        if kind == "NodePool"
    }


def node_claim_requests(snapshot, result: dict) -> dict[str, dict[str, str]]:
    """Per new NodeClaim of a result: its ``spec.resources.requests`` as Karpenter sets them,
    the requests of the pods placed on it (a ``pods`` slot each, RequestsForPods) plus the
    DaemonSet overhead it is launched with (the least of its instance types' overhead groups,
    Karpenter's addDaemonRequests); quantities canonical. Empty when the snapshot no longer
    loads."""
    from allocator.scheduling.daemonsets import DaemonPods, daemon_pods, overhead_groups
    from allocator.scheduling.fit import (
        add_into,
        format_quantity,
        instance_type_info,
        node_pool_requirements,
    )
    from allocator.scheduling.fit import pod_requests as requests_of
    from allocator.scheduling.nodeclaim import least_overhead

    model = snapshot_model(snapshot)
    if model is None:
        return {}
    pods = {f"{p.namespace}/{p.name}": p for p in model.pods}
    daemons = None
    out: dict[str, dict[str, str]] = {}
    for nc in result.get("nodeClaims") or []:
        total: dict[str, int] = {}
        for key in nc.get("pods") or []:
            if key in pods:
                add_into(total, requests_of(pods[key]))
        pool = model.node_pools.get(nc.get("nodePool"))
        if pool is not None:
            if daemons is None:
                daemons = daemon_pods(model.daemon_sets, model.pods)
            names = [n for n in nc.get("instanceTypes") or [] if n in model.instance_types]
            infos = [instance_type_info(model.instance_types[n]) for n in names]
            groups = overhead_groups(
                DaemonPods(daemons), node_pool_requirements(pool), pool.taints, infos
            )
            add_into(total, least_overhead(groups, names))
        out[nc.get("name")] = {
            name: format_quantity(name, value) for name, value in sorted(total.items()) if value
        }
    return out


_pool_indexes: OrderedDict[int, dict] = OrderedDict()


def pool_slices(model, driver: str, pool: str) -> list:
    """The ResourceSlices of one pool, from an index built once per snapshot model (a page of
    pools on a 1,000-node cluster must not scan every slice per pool)."""
    if model is None:
        return []

    def build():
        index: dict[tuple[str, str], list] = {}
        for s in model.resource_slices:
            index.setdefault((s.driver, s.pool), []).append(s)
        return model, index

    owner, index = _remember(_pool_indexes, id(model), build)
    if owner is not model:  # an id reused after the model it indexed was dropped
        with _lock:
            _pool_indexes.pop(id(model), None)
        owner, index = _remember(_pool_indexes, id(model), build)
    return index.get((driver, pool), [])


_reason_group_cache: OrderedDict[tuple, tuple] = OrderedDict()
_REASON_GROUPS_KEPT = 2000


def pod_reason_groups(run, pod: dict, node_claims) -> tuple[list[dict], int]:
    """A failed pod's ``reasons`` grouped (presenters.reason_groups) and the targets they
    stand for, kept per process: a finished run never changes, and grouping a pod refused by
    thousands of nodes is the costliest part of its run page."""
    reasons = pod.get("reasons") or []

    def build() -> tuple[list[dict], int]:
        return presenters.reason_groups(reasons, node_claims), presenters.target_count(reasons)

    key = (run.pk, str(run.finished_at), pod.get("pod"))
    return _remember(_reason_group_cache, key, build, kept=_REASON_GROUPS_KEPT)


def object_patch(snapshot, ref: str, text: str) -> list[dict]:
    """The JSON patch from the snapshot's object ``ref`` ("Kind ns/name") to ``text`` (its
    edited YAML, managedFields left out as the page shows it). ValueError names what is wrong."""
    stored = index_documents(snapshot.documents()).get(ref)
    if stored is None:
        raise ValueError(f"{ref or 'object'}: not in the snapshot")
    try:
        edited = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ValueError(f"{ref}: the edited YAML does not parse: {exc}") from None
    before = presenters.without_managed_fields(stored[1])
    try:
        patch = patch_between(before, edited)
    except EditError as exc:
        raise ValueError(f"{ref}: {exc}") from None
    if not patch:
        raise ValueError(f"{ref}: nothing was changed")
    return patch
