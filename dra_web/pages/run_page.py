"""The run page's model and its parts (reads only): the summary, placements, NodeClaims, pools,
search tree and reviews of a finished run; a failed pod's explanation as its review page shows
it; the partials the run page loads on demand; the NodeClaims as Karpenter would create them.

The page is bounded: only the pods, pools and reasons of the pages shown are explained, so a
run where thousands of pods fail on thousands of nodes costs what one page of them costs.
"""

from __future__ import annotations

import json
from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from django.http import Http404

from allocator.featuregates import GATE_NAMES
from dra_web.pages import presenters
from dra_web.pages import selectors as page_selectors
from dra_web.reviews import selectors as review_selectors
from dra_web.runs import selectors as run_selectors
from dra_web.runs.models import Run
from dra_web.runs.page_facts import PageFacts

PLACEMENTS_PER_PAGE = 25
NODE_CLAIMS_PER_PAGE = 20
# A NodeClaim's kept instance types listed with their price (Karpenter's benchmark keeps 400):
# the cheapest, which it launches first; the others are counted.
INSTANCE_TYPES_SHOWN = 12
REVIEWS_PER_PAGE = 50
POOLS_PER_PAGE = 50
FAILED_IN_SUMMARY = 20
# Failed pods of the summary explained in the page itself; the others (and the failed pods of
# the placements) load their explanation when they scroll into view.
FAILED_EXPLAINED_INLINE = 3
REASONS_PER_PAGE = 100
POOL_DEVICES_SHOWN = 200
OTHER_RUNS_SHOWN = 100
TAINTED_DEVICES_SHOWN = 200

# NodeClaim fields the NodeClaims section shows in their own places; the rest is listed as is.
_NODE_CLAIM_FIELDS_SHOWN = {
    "name",
    "nodePool",
    "instanceTypes",
    "requirements",
    "annotations",
    "pods",
    "cost",
    "zones",
    "zonePinnedBy",
    "instanceTypesPruned",
    "requirementsBeforeDRA",
    "requirementsBefore",
    "price",
    # allocator/scheduling/report.py
    "templateSlices",
    "devices",
    "deviceTaints",
    "bindingConditions",
    "initializationGating",
}


@dataclass(frozen=True, slots=True)
class RunPageNumbers:
    """The page of each paginated section that was asked for (query parameters, unparsed:
    Django's paginator turns anything out of range into the nearest page)."""

    placements: str | None = None
    reviews: str | None = None
    pools: str | None = None
    node_claims: str | None = None


def finished_run(run_id) -> Run:
    """The run, when it has a result (downloads and partials of the run page); 404 otherwise."""
    run = run_selectors.get_run(run_id)
    if run.status != Run.SUCCEEDED or not run.result:
        raise Http404(f"run #{run.pk} is {run.status}: it has no result yet")
    return run


@dataclass(frozen=True, slots=True)
class PodOfRun:
    """A finished run's entry of one pod (a copy), with the result's NodeClaim names and
    pools its explanation links to."""

    run: Run
    pod: dict[str, Any]
    node_claim_names: Collection[str]
    pools: list[dict[str, Any]]


def pod_of_run(run_id, key: str) -> PodOfRun:
    """The pod ``key`` of a finished run: a failed pod's from what the run keeps apart from its
    result (runs/failures.py), any other pod's (or any pod of a run stored before) from the
    result; 404 when the run has none."""
    run = run_selectors.get_run(run_id, with_result=False)
    if run.status == Run.SUCCEEDED:
        kept = run_selectors.failures(run)
        if kept is not None and key in kept.pods:
            return PodOfRun(run, dict(kept.pods[key]), kept.node_claim_names, kept.pools())
    run = finished_run(run_id)
    result = run.result or {}
    return PodOfRun(
        run, failed_pod(run, key), presenters.node_claim_names(result), result.get("pools") or []
    )


def failed_pod(run: Run, key: str) -> dict[str, Any]:
    """The result's entry of the pod ``namespace/name`` (a copy); 404 when the run has none."""
    pod = next((p for p in (run.result or {}).get("pods") or [] if p.get("pod") == key), None)
    if pod is None:
        raise Http404(f"pod {key} is not in run #{run.pk}")
    return dict(pod)


def explain(run: Run, pod: dict, names, links) -> None:
    """A failed pod's reasons grouped (bounded whatever the cluster size), its funnel and its
    suggestions as the pages show them, added to ``pod`` in place."""
    if "reason_groups" in pod:
        return
    groups, count = page_selectors.pod_reason_groups(run, pod, names)
    pod["reason_groups"] = [dict(g) for g in groups]
    pod["aggregate"] = presenters.aggregate_groups(groups)
    pod["target_count"] = count
    pod["funnels"] = presenters.funnel_view(pod.get("explanation"), links)
    pod["suggestions_view"] = presenters.suggestion_view(pod.get("suggestions"), names)
    pod["suggestions_known"] = isinstance(pod.get("suggestions"), list)


def with_claim_intents(pod: dict, facts: PageFacts) -> dict:
    """The pod with ``claims_view``: each of its claims beside what the claim asked for."""
    claims = [
        {
            **claim,
            "intent": facts.intent(pod.get("pod") or "", claim.get("claim") or ""),
            "device_rows": presenters.grouped_devices(claim.get("devices") or []),
        }
        for claim in pod.get("claims") or []
    ]
    return {**pod, "claims_view": claims}


def _node_claims(shown: list[dict], view: dict, facts: PageFacts, run: Run) -> list[dict[str, Any]]:
    """The NodeClaims ``shown`` (a page of them) with what their section shows."""
    held = presenters.devices_by_claim(view["pods"], {nc.get("name") or "" for nc in shown})
    pruned_in_trace = run_selectors.instance_types_pruned(run, {nc.get("name") for nc in shown})
    out = []
    for nc in shown:
        prices = presenters.allowed_prices(
            facts.offerings, nc.get("requirements"), nc.get("instanceTypes")
        )
        devices = held.get(nc.get("name") or "", [])
        by_price = presenters.instance_types_by_price(nc.get("instanceTypes"), prices)
        pruned = (
            nc["instanceTypesPruned"]
            if "instanceTypesPruned" in nc
            else pruned_in_trace.get(nc.get("name") or "", [])
        )
        templates = (
            nc["templateSlices"]
            if "templateSlices" in nc
            else [
                {"instanceType": it, "slices": facts.template_slices.get(it) or []}
                for it in nc.get("instanceTypes") or []
            ]
        )
        out.append(
            {
                **nc,
                "held": presenters.grouped_devices(devices),
                "pruned": pruned,
                "pruned_groups": presenters.pruned_groups(pruned),
                "before": nc.get("requirementsBeforeDRA")
                or nc.get("requirementsBefore")
                or facts.node_pool_requirements.get(nc.get("nodePool") or "")
                or [],
                "by_price": by_price,
                "by_price_shown": by_price[:INSTANCE_TYPES_SHOWN],
                "by_price_more": max(0, len(by_price) - INSTANCE_TYPES_SHOWN),
                "templates_with": presenters.template_groups(
                    [t for t in templates if t.get("slices")]
                ),
                "templates_without": _without_slices(nc, templates),
                "tolerated": [d for d in devices if d.get("tolerations")],
                "binding": [
                    d
                    for d in devices
                    if d.get("bindingConditions")
                    or d.get("bindsToNode")
                    or d.get("bindingFailureConditions")
                ],
                "other": {k: v for k, v in nc.items() if k not in _NODE_CLAIM_FIELDS_SHOWN},
            }
        )
    return out


def other_runs(run: Run) -> list[Run]:
    """The runs the page offers to compare this one with: those of the same snapshot lineage
    (the snapshot, what-ifs derived from it, the one it derives from) first, newest first."""
    family = run_selectors.lineage_runs(run)[:OTHER_RUNS_SHOWN]
    shown = {r.pk for r in family}
    rest = run_selectors.run_list().exclude(pk__in=shown | {run.pk})[
        : max(OTHER_RUNS_SHOWN - len(family), 0)
    ]
    return [*family, *rest]


def run_page(run: Run, numbers: RunPageNumbers) -> dict[str, Any]:
    """The run page's template context: the run (and the form to run it again) until it has
    a result, then the result's sections (the pages of them asked for)."""
    ctx: dict[str, Any] = {"run": run, "snapshot": run.snapshot, "gate_names": GATE_NAMES}
    if run.status != Run.SUCCEEDED or not run.result:
        return ctx
    view = presenters.result_view(run.result)
    # What the page shows from the snapshot, derived when the run was stored: the typed
    # snapshot is not built for a page view.
    facts = page_selectors.run_facts(run)
    presenters.fill_costs_from_catalog(view["node_claims"], facts.offerings)
    view["total_cost"] = sum((nc["cost"]["price"] or 0) for nc in view["node_claims"])
    placements_page = presenters.page_of(
        view["failed"] + view["scheduled"], PLACEMENTS_PER_PAGE, numbers.placements
    )
    reviews = review_selectors.reviews_by_pod(run)
    for pod in view["failed"]:
        pod["review"] = reviews.get(pod.get("pod"))
    review_page = presenters.page_of(view["failed"], REVIEWS_PER_PAGE, numbers.reviews)
    pools_page = presenters.page_of(view["pools"], POOLS_PER_PAGE, numbers.pools)
    node_claims_page = presenters.page_of(
        view["node_claims"], NODE_CLAIMS_PER_PAGE, numbers.node_claims
    )
    links = presenters.pool_links(
        view["pools"], per_page=POOLS_PER_PAGE, current_page=pools_page.number
    )
    names = presenters.node_claim_names(run.result)
    failed_shown = view["failed"][:FAILED_IN_SUMMARY]
    # Only the pods this page explains inline, and the review list's decisive causes.
    for pod in [*failed_shown[:FAILED_EXPLAINED_INLINE], *review_page]:
        if not pod.get("scheduled"):
            explain(run, pod, names, links)
    # The devices themselves load when a pool's row is opened (pool_devices): 50 pools of a
    # 1,000-node cluster would otherwise be most of the page.
    pools = [
        {**pool, **facts.pool_summary(pool.get("driver"), pool.get("pool"))} for pool in pools_page
    ]
    tainted = run_selectors.trace_search(
        run, run_selectors.TraceFilter(reason="taint"), limit=TAINTED_DEVICES_SHOWN
    )
    ctx.update(
        {
            "view": view,
            "placements": [with_claim_intents(pod, facts) for pod in placements_page],
            "placements_page": placements_page,
            "node_claims": _node_claims(list(node_claims_page), view, facts, run),
            "node_claims_page": node_claims_page,
            "pools": pools,
            "pools_page": pools_page,
            "node_claim_names_json": json.dumps(sorted(n for n in names if n)),
            "failed_shown": failed_shown,
            "failed_inline": FAILED_EXPLAINED_INLINE,
            "reviews": reviews,
            "review_page": review_page,
            "reason_counts": run_selectors.trace_reason_counts(run),
            "taint_excluded": run_selectors.with_ancestor_labels(
                run, [n for n in tainted if n.get("kind") == "device"]
            ),
            "device_conditions": presenters.device_conditions(view["pods"]),
            "other_runs": other_runs(run),
        }
    )
    return ctx


def review_pod(found: PodOfRun, run_url: str) -> dict[str, Any]:
    """The pod as its review page shows it: explained like on the run page (its funnel's
    example devices link to the run page's Pools tab at ``run_url``), its claims beside what
    they asked for."""
    pod = found.pod
    links = presenters.pool_links(found.pools, base=run_url, per_page=POOLS_PER_PAGE)
    explain(found.run, pod, found.node_claim_names, links)
    return with_claim_intents(pod, page_selectors.run_facts(found.run))


def pod_explanation(found: PodOfRun, run_url: str) -> dict[str, Any]:
    """A failed pod explained as the run page shows it inline (the partial its lazily loaded
    failures fetch); funnel links to pools point at the run page's Pools tab (``run_url``)."""
    links = presenters.pool_links(found.pools, base=run_url, per_page=POOLS_PER_PAGE)
    explain(found.run, found.pod, found.node_claim_names, links)
    return {"run": found.run, "pod": found.pod}


def pod_reasons(found: PodOfRun, number: str | None) -> dict[str, Any]:
    """Every target that refused a pod, a page at a time (the run page's partial)."""
    pod = found.pod
    page = presenters.page_of(pod.get("reasons") or [], REASONS_PER_PAGE, number)
    names = found.node_claim_names
    page.object_list = [
        {**r, "target": presenters.target_name(r.get("target"), names)} for r in page.object_list
    ]
    namespace, _, name = (pod.get("pod") or "").partition("/")
    return {"run": found.run, "pod": pod, "page": page, "namespace": namespace, "name": name}


def pool_devices(run: Run, driver: str, pool: str, wanted: str) -> dict[str, Any]:
    """One in-cluster pool's devices (the Pools tab's partial): the first
    ``POOL_DEVICES_SHOWN``, and the device a link asks for (``wanted``, its anchor) even past
    them."""
    model = page_selectors.snapshot_model(run.snapshot)
    devices = page_selectors.pool_view(model, driver, pool)["devices"]
    claims = model.resource_claims.values() if model is not None else ()
    holders = presenters.device_holders(claims, run.result, driver, pool)
    slices = page_selectors.pool_slices(model, driver, pool) if model is not None else []
    newest = max((s.generation for s in slices), default=0)
    counters = presenters.counter_usage([s for s in slices if s.generation == newest], holders)
    devices = [{**d, "heldBy": holders.get(d.get("name") or "", [])} for d in devices]
    shown = devices[:POOL_DEVICES_SHOWN]
    if wanted and not any(presenters.pool_device_anchor(d.get("name")) == wanted for d in shown):
        shown += [d for d in devices if presenters.pool_device_anchor(d.get("name")) == wanted]
    return {
        "devices": shown,
        "device_count": len(devices),
        "counters": counters,
        "row_prefix": presenters.pool_anchor(driver, pool),
        "wanted": wanted,
    }


def node_claims_yaml(run: Run, wanted: str | None) -> str:
    """The run's new NodeClaims (or the one named ``wanted``) as Karpenter would create them;
    404 when the run creates no NodeClaim of that name."""
    pools = page_selectors.node_pool_documents(run.snapshot)
    requests = page_selectors.node_claim_requests(run.snapshot, run.result)
    manifests = [
        presenters.node_claim_manifest(
            nc, pools.get(nc.get("nodePool")), requests.get(nc.get("name"))
        )
        for nc in run.result.get("nodeClaims") or []
        if wanted is None or nc.get("name") == wanted
    ]
    if wanted is not None and not manifests:
        raise Http404(f"run #{run.pk} creates no NodeClaim {wanted}")
    return presenters.manifests_yaml(manifests)


def _without_slices(nc: dict, templates: list[dict]) -> list[dict]:
    """The NodeClaim's instance types that launch with no template slice: those the result
    lists with none, and those it leaves out of ``templateSlices`` (it lists only the ones
    that publish devices)."""
    with_slices = {t.get("instanceType") for t in templates if t.get("slices")}
    return [
        {"instanceType": name} for name in nc.get("instanceTypes") or [] if name not in with_slices
    ]
