"""The debugger's pages (CONTRACT section 7). Thin: read through selectors, write via services."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from allocator.features.gates import GATE_NAMES
from dra_web.pages import presenters
from dra_web.pages import selectors as page_selectors
from dra_web.pages.forms import CommentForm, RunForm, UploadForm
from dra_web.reviews import selectors as review_selectors
from dra_web.reviews import services as review_services
from dra_web.runs import selectors as run_selectors
from dra_web.runs import services as run_services
from dra_web.snapshots import selectors as snapshot_selectors
from dra_web.snapshots import services as snapshot_services

RUNS_PER_PAGE = 15
SNAPSHOTS_PER_PAGE = 10
OBJECTS_PER_PAGE = 40
PLACEMENTS_PER_PAGE = 25
REVIEWS_PER_PAGE = 50
POOL_DEVICES_SHOWN = 200
POOLS_PER_PAGE = 50
FAILED_IN_SUMMARY = 20
REASONS_PER_PAGE = 100
TREE_PAGE = 200


def _page(request, items, per_page, param="page"):
    return Paginator(items, per_page).get_page(request.GET.get(param))


_FAVICON = Path(__file__).resolve().parents[2] / "static" / "favicon.ico"


@require_GET
def favicon(request):
    """``/favicon.ico``, which browsers and crawlers ask for whatever the page links: the icon
    itself (16, 32 and 48 px renderings of static/favicon.svg), served without a login and
    whether or not static files are served by this process."""
    try:
        body = _FAVICON.read_bytes()
    except OSError:  # an installation without the file: the SVG through the static files
        from django.templatetags.static import static

        return redirect(static("favicon.svg"))
    response = HttpResponse(body, content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response


# --- dashboard -----------------------------------------------------------------------------


def _dashboard_context(request, upload_form=None, run_form=None, upload_problems=None):
    review = request.GET.get("review") or ""
    status = request.GET.get("status") or ""
    mine = request.GET.get("mine") == "1"
    runs = run_selectors.run_list(
        owner=request.user if mine else None, status=status or None
    ).select_related("snapshot", "owner")
    if review == "open":
        runs = runs.filter(pk__in=review_selectors.run_ids_with_open_review())
    snapshots = snapshot_selectors.snapshot_list(owner=request.user if mine else None)
    open_reviews = review_selectors.open_reviews().select_related("run", "run__snapshot")[:50]
    runs_page = _page(request, runs, RUNS_PER_PAGE)
    open_ids = review_selectors.run_ids_with_open_review()
    for run in runs_page:
        run.has_open_review = run.pk in open_ids
    return {
        "nav": "reviews" if review == "open" else "dashboard",
        "runs": runs_page,
        "snapshots": _page(request, snapshots, SNAPSHOTS_PER_PAGE, "spage"),
        "snapshot_choices": snapshot_selectors.snapshot_list(owner=None)[:200],
        "open_reviews": open_reviews,
        "upload_form": upload_form or UploadForm(),
        "run_form": run_form or RunForm(),
        "upload_problems": upload_problems or [],
        "gate_names": GATE_NAMES,
        "filters": {"review": review, "status": status, "mine": mine},
        "statuses": ["queued", "running", "succeeded", "failed"],
    }


@login_required
@require_GET
def dashboard(request):
    return render(request, "pages/dashboard.html", _dashboard_context(request))


@login_required
@require_POST
def upload(request):
    form = UploadForm(request.POST, request.FILES)
    if not form.is_valid():
        ctx = _dashboard_context(request, upload_form=form)
        return render(request, "pages/dashboard.html", ctx, status=400)
    files = [(f.name, f.read()) for f in form.cleaned_data["files"]]
    try:
        snapshot = snapshot_services.create_snapshot(
            request.user, files, form.cleaned_data.get("name") or None
        )
    except snapshot_services.SnapshotUploadError as e:
        ctx = _dashboard_context(request, upload_form=form, upload_problems=e.problems or [str(e)])
        return render(request, "pages/dashboard.html", ctx, status=getattr(e, "status", 400))
    if getattr(snapshot, "existing", False):
        messages.info(request, f"This content was already uploaded as “{snapshot.name}”.")
    else:
        messages.success(request, f"Uploaded “{snapshot.name}”: {snapshot.object_total} objects.")
    return redirect("pages:snapshot", snapshot_id=snapshot.pk)


@login_required
@require_POST
def start_run(request):
    snapshot = snapshot_selectors.get_snapshot(request.POST.get("snapshot") or 0)
    model = page_selectors.snapshot_model(snapshot)
    form = RunForm(request.POST, nodes=sorted(model.nodes) if model else [])
    if not form.is_valid():
        for field, errors in form.errors.items():
            messages.error(request, f"{field}: {' '.join(errors)}")
        return redirect(request.POST.get("back") or reverse("pages:dashboard"))
    try:
        run = run_services.start_run(request.user, snapshot, form.options())
    except run_services.RunOptionsError as e:
        messages.error(request, f"Could not start the run: {e}")
        return redirect(request.POST.get("back") or reverse("pages:dashboard"))
    return redirect("pages:run", run_id=run.pk)


@login_required
@require_GET
def run_row(request, run_id):
    run = run_selectors.get_run(run_id)
    run.has_open_review = run.reviews.filter(state="open").exists()
    return render(request, "pages/_run_row.html", {"run": run})


@login_required
@require_GET
def run_status(request, run_id):
    run = run_selectors.get_run(run_id)
    response = render(request, "pages/_run_status.html", {"run": run})
    if run.finished:
        # The page around the status box shows the result: reload it once the run is done.
        response["HX-Refresh"] = "true"
    return response


# --- snapshot --------------------------------------------------------------------------------


@login_required
@require_GET
def snapshot_detail(request, snapshot_id):
    snapshot = snapshot_selectors.get_snapshot(snapshot_id)
    by_kind = snapshot_selectors.objects_by_kind(snapshot)
    kinds = sorted(by_kind, key=lambda k: (-len(by_kind[k]), k))
    kind = request.GET.get("kind") or (kinds[0] if kinds else "")
    if kind and kind not in by_kind:
        raise Http404(f"no {kind} in this snapshot")
    objects = _page(request, by_kind.get(kind, []), OBJECTS_PER_PAGE)
    device_classes = []
    for obj in by_kind.get("DeviceClass", []):
        spec = obj["raw"].get("spec") or {}
        device_classes.append(
            {
                "name": obj["name"],
                "selectors": [
                    (s.get("cel") or {}).get("expression") or str(s)
                    for s in spec.get("selectors") or []
                ],
                "extendedResourceName": spec.get("extendedResourceName"),
                "config": spec.get("config") or [],
            }
        )
    model = page_selectors.snapshot_model(snapshot)
    nodes = sorted(model.nodes) if model else []
    return render(
        request,
        "pages/snapshot.html",
        {
            "snapshot": snapshot,
            "kinds": [(k, len(by_kind[k])) for k in kinds],
            "kind": kind,
            "objects": objects,
            "device_classes": device_classes,
            "runs": snapshot.runs.all()[:20],
            "nodes": nodes,
            "gate_names": GATE_NAMES,
        },
    )


# --- run ---------------------------------------------------------------------------------------


def _explain(run, pod: dict, names, links) -> None:
    """A failed pod's reasons grouped (bounded whatever the cluster size), its funnel and its
    suggestions as the pages show them."""
    if "reason_groups" in pod:
        return
    groups, count = page_selectors.pod_reason_groups(run, pod, names)
    pod["reason_groups"] = [dict(g) for g in groups]
    pod["aggregate"] = presenters.aggregate_groups(groups)
    pod["target_count"] = count
    pod["funnels"] = presenters.funnel_view(pod.get("explanation"), links)
    pod["suggestions_view"] = presenters.suggestion_view(pod.get("suggestions"), names)
    pod["suggestions_known"] = isinstance(pod.get("suggestions"), list)


def _placements(run, view, specs, page):
    items = []
    for pod in page:
        claims = []
        for claim in pod.get("claims") or []:
            intent = page_selectors.claim_intent(
                specs, pod.get("pod") or "", claim.get("claim") or ""
            )
            claims.append({**claim, "intent": intent})
        items.append({**pod, "claims_view": claims})
    return items


def _node_claims(view, model, run):
    held = presenters.devices_by_claim(view["pods"])
    pruned_in_trace = page_selectors.instance_types_pruned(
        run, {nc.get("name") for nc in view["node_claims"]}
    )
    known = {
        "name",
        "nodePool",
        "instanceTypes",
        "requirements",
        "annotations",
        "pods",
        "cost",
        "zones",
        "instanceTypesPruned",
        "requirementsBeforeDRA",
        "requirementsBefore",
        "price",
        # allocator/scheduling/report.py: shown in their own places on the page.
        "templateSlices",
        "devices",
        "deviceTaints",
        "bindingConditions",
        "initializationGating",
    }
    prices = presenters.cheapest_prices(model.instance_types) if model is not None else {}
    out = []
    for nc in view["node_claims"]:
        devices = held.get(nc.get("name") or "", [])
        templates = nc.get("templateSlices") or [
            {"instanceType": it, "slices": page_selectors.template_slices(model, it)}
            for it in nc.get("instanceTypes") or []
        ]
        out.append(
            {
                **nc,
                "held": devices,
                "pruned": nc["instanceTypesPruned"]
                if "instanceTypesPruned" in nc
                else pruned_in_trace.get(nc.get("name") or "", []),
                "before": nc.get("requirementsBeforeDRA")
                or nc.get("requirementsBefore")
                or page_selectors.node_pool_requirements(model, nc.get("nodePool")),
                "by_price": presenters.instance_types_by_price(nc.get("instanceTypes"), prices),
                "templates_with": [t for t in templates if t.get("slices")],
                "templates_without": [t for t in templates if not t.get("slices")],
                "tolerated": [d for d in devices if d.get("tolerations")],
                "binding": [
                    d
                    for d in devices
                    if d.get("bindingConditions")
                    or d.get("bindsToNode")
                    or d.get("bindingFailureConditions")
                ],
                "other": {k: v for k, v in nc.items() if k not in known},
            }
        )
    return out


@login_required
@require_GET
def run_detail(request, run_id):
    run = run_selectors.get_run(run_id)
    ctx = {"run": run, "snapshot": run.snapshot, "gate_names": GATE_NAMES}
    if run.status != "succeeded" or not run.result:
        return render(request, "pages/run.html", ctx)
    view = presenters.result_view(run.result)
    model = page_selectors.snapshot_model(run.snapshot)
    if model is not None:
        presenters.fill_costs_from_catalog(
            view["node_claims"], presenters.cheapest_prices(model.instance_types)
        )
        view["total_cost"] = sum((nc["cost"]["price"] or 0) for nc in view["node_claims"])
    specs = page_selectors.claim_specs(run.snapshot.documents())
    ordered = view["failed"] + view["scheduled"]
    placements_page = _page(request, ordered, PLACEMENTS_PER_PAGE, "ppage")
    reviews = review_selectors.reviews_by_pod(run)
    for pod in view["failed"]:
        pod["review"] = reviews.get(pod.get("pod"))
    review_page = _page(request, view["failed"], REVIEWS_PER_PAGE, "rpage")
    pools_page = _page(request, view["pools"], POOLS_PER_PAGE, "olpage")
    links = presenters.pool_links(
        view["pools"], per_page=POOLS_PER_PAGE, current_page=pools_page.number
    )
    names = presenters.node_claim_names(run.result)
    failed_shown = view["failed"][:FAILED_IN_SUMMARY]
    # Only the pods this page shows are explained: a run with thousands of failed pods on
    # thousands of nodes costs what one page of them costs.
    for pod in [*failed_shown, *placements_page, *review_page]:
        if not pod.get("scheduled"):
            _explain(run, pod, names, links)
    pools = []
    for pool in pools_page:
        # The devices themselves load when a row is opened (pool_devices): 50 pools of a
        # 1,000-node cluster would otherwise be most of the page.
        extra = page_selectors.pool_summary(model, pool.get("driver"), pool.get("pool"))
        pools.append({**pool, **extra})
    reason_counts = page_selectors.trace_reason_counts(run)
    taint_excluded = page_selectors.with_ancestor_labels(
        run,
        [
            n
            for n in run_selectors.trace_search(run, reason="taint", limit=200)
            if n.get("kind") == "device"
        ],
    )
    ctx.update(
        {
            "view": view,
            "placements": _placements(run, view, specs, placements_page),
            "placements_page": placements_page,
            "node_claims": _node_claims(view, model, run),
            "pools": pools,
            "pools_page": pools_page,
            "node_claim_names_json": json.dumps(sorted(n for n in names if n)),
            "failed_shown": failed_shown,
            "reviews": reviews,
            "review_page": review_page,
            "reason_counts": reason_counts,
            "taint_excluded": taint_excluded,
            "device_conditions": presenters.device_conditions(view["pods"]),
            "other_runs": run_selectors.run_list()
            .exclude(pk=run.pk)
            .select_related("snapshot")[:100],
        }
    )
    return render(request, "pages/run.html", ctx)


@login_required
@require_GET
def diff_pick(request, run_id):
    other = request.GET.get("other")
    if not other:
        return redirect("pages:run", run_id=run_id)
    return redirect("pages:diff", run_a=run_id, run_b=int(other))


@login_required
@require_GET
def run_diff(request, run_a, run_b):
    a = run_selectors.get_run(run_a)
    b = run_selectors.get_run(run_b)
    ctx = {
        "a": a,
        "b": b,
        "other_runs": run_selectors.run_list().exclude(pk=a.pk)[:100],
        "option_changes": presenters.option_changes(a.options, b.options),
    }
    if a.result and b.result:
        diff = run_selectors.diff_runs(a, b)
        ctx["diff"] = diff
        ctx["causes"] = presenters.divergence_causes((diff.get("trace") or {}).get("divergences"))
        ctx["errors"] = presenters.error_changes((diff.get("pods") or {}).get("changedErrors"))
        ctx["funnels"] = presenters.funnel_diff(a.result, b.result)
    return render(request, "pages/diff.html", ctx)


# --- review ------------------------------------------------------------------------------------


@login_required
def pod_review(request, run_id, namespace, name):
    run = run_selectors.get_run(run_id)
    key = f"{namespace}/{name}"
    pod = next((p for p in (run.result or {}).get("pods") or [] if p.get("pod") == key), None)
    if pod is None:
        raise Http404(f"pod {key} is not in run #{run.pk}")
    names = presenters.node_claim_names(run.result)
    pod = dict(pod)
    run_url = reverse("pages:run", args=[run.pk])
    _explain(
        run,
        pod,
        names,
        presenters.pool_links(
            (run.result or {}).get("pools") or [], base=run_url, per_page=POOLS_PER_PAGE
        ),
    )
    specs = page_selectors.claim_specs(run.snapshot.documents())
    pod["claims_view"] = [
        {**c, "intent": page_selectors.claim_intent(specs, key, c.get("claim") or "")}
        for c in pod.get("claims") or []
    ]
    form = CommentForm()
    status = 200
    if request.method == "POST":
        form = CommentForm(request.POST)
        if form.is_valid():
            data = form.cleaned_data
            try:
                if data.get("verdict"):
                    review_services.set_verdict(
                        run, key, request.user, data["verdict"], data["body"]
                    )
                elif (data.get("body") or "").strip():
                    review_services.add_comment(run, key, request.user, data["body"])
                if data.get("state"):
                    review_services.set_state(run, key, request.user, data["state"])
            except review_services.ReviewError as e:
                form.add_error(None, str(e))
            else:
                url = reverse("pages:pod-review", args=[run.pk, namespace, name])
                return redirect(f"{url}#thread")
        status = 400
    return render(
        request,
        "pages/review.html",
        {
            "run": run,
            "pod": pod,
            "review": review_selectors.review_for(run, key),
            "form": form,
        },
        status=status,
    )


# --- the search tree's JSON helpers -----------------------------------------------------------


def _int(value, default=None):
    try:
        return int(value)
    except (TypeError, ValueError):
        return default


def _query_int(request, name: str, default: int, low: int, high: int | None = None) -> int:
    """An integer query parameter, ``default`` when absent or not a number, kept in [low, high]."""
    value = max(low, _int(request.GET.get(name), default))
    return value if high is None else min(high, value)


@login_required
@require_GET
def tree_children(request, run_id):
    run = run_selectors.get_run(run_id)
    page = page_selectors.trace_children_window(
        run,
        _int(request.GET.get("parent")),
        offset=_query_int(request, "offset", 0, 0),
        limit=_query_int(request, "limit", TREE_PAGE, 1, 1000),
        expand=_query_int(request, "expand", 0, 0, 2000),
    )
    return JsonResponse(page)


@login_required
@require_GET
def tree_node(request, run_id, node_id):
    run = run_selectors.get_run(run_id)
    node = page_selectors.trace_node_detail(run, node_id)
    if node is None:
        raise Http404("no such trace node")
    return JsonResponse(node)


@login_required
@require_GET
def tree_reveal(request, run_id, node_id):
    run = run_selectors.get_run(run_id)
    path = page_selectors.trace_reveal(run, node_id, page=TREE_PAGE)
    if not path:
        raise Http404("no such trace node")
    return JsonResponse({"path": path})


@login_required
@require_GET
def tree_search(request, run_id):
    run = run_selectors.get_run(run_id)
    found = page_selectors.trace_search_page(
        run,
        request.GET.get("q") or None,
        reason=request.GET.get("reason") or None,
        status=request.GET.get("status") or None,
        kind=request.GET.get("kind") or None,
        limit=_query_int(request, "limit", 100, 1, 500),
    )
    return JsonResponse(found)


@login_required
@require_GET
def tree_overview(request, run_id):
    run = run_selectors.get_run(run_id)
    return JsonResponse(page_selectors.trace_overview(run))


# --- downloads, partials and actions of the run page -----------------------------------------


def _attachment(body: bytes | str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _finished_run(run_id):
    run = run_selectors.get_run(run_id)
    if run.status != "succeeded" or not run.result:
        raise Http404(f"run #{run.pk} is {run.status}: it has no result yet")
    return run


@login_required
@require_GET
def download_result(request, run_id):
    run = _finished_run(run_id)
    return _attachment(
        page_selectors.result_json_bytes(run), "application/json", f"run-{run.pk}-result.json"
    )


@login_required
@require_GET
def download_trace(request, run_id):
    run = _finished_run(run_id)
    if run.trace_blob is None:
        raise Http404(f"run #{run.pk} recorded no trace")
    return _attachment(
        page_selectors.trace_json_bytes(run), "application/json", f"run-{run.pk}-trace.json"
    )


def _node_claim_yaml(run, wanted: str | None) -> str:
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


@login_required
@require_GET
def download_node_claims(request, run_id):
    run = _finished_run(run_id)
    return _attachment(
        _node_claim_yaml(run, None), "application/yaml", f"run-{run.pk}-nodeclaims.yaml"
    )


@login_required
@require_GET
def download_node_claim(request, run_id, name):
    run = _finished_run(run_id)
    return _attachment(_node_claim_yaml(run, name), "application/yaml", f"{name}.yaml")


@login_required
@require_GET
def pod_reasons(request, run_id, namespace, name):
    """Every target that refused a pod, a page at a time (htmx partial of the run page)."""
    run = _finished_run(run_id)
    key = f"{namespace}/{name}"
    pod = next((p for p in run.result.get("pods") or [] if p.get("pod") == key), None)
    if pod is None:
        raise Http404(f"pod {key} is not in run #{run.pk}")
    page = _page(request, pod.get("reasons") or [], REASONS_PER_PAGE, "page")
    names = presenters.node_claim_names(run.result)
    page.object_list = [
        {**r, "target": presenters.target_name(r.get("target"), names)} for r in page.object_list
    ]
    return render(
        request,
        "pages/_reason_list.html",
        {"run": run, "pod": pod, "page": page, "namespace": namespace, "name": name},
    )


@login_required
@require_POST
def cancel_run(request, run_id):
    """Cancel a queued or running run (the runs service stops its worker)."""
    run = run_selectors.get_run(run_id)
    try:
        run_services.cancel_run(run, request.user)
    except Exception as e:  # the service's refusals (not yours, finished...): say why, no 500
        messages.error(request, f"Could not cancel run #{run.pk}: {e}")
    else:
        messages.info(request, f"Run #{run.pk} is being cancelled.")
    return redirect("pages:run", run_id=run.pk)


@login_required
@require_GET
def pool_devices(request, run_id):
    """One in-cluster pool's devices (htmx partial of the Pools tab)."""
    run = _finished_run(run_id)
    model = page_selectors.snapshot_model(run.snapshot)
    driver, pool = request.GET.get("driver") or "", request.GET.get("pool") or ""
    extra = page_selectors.pool_view(model, driver, pool)
    devices = extra["devices"]
    shown = devices[:POOL_DEVICES_SHOWN]
    # A link to one device (``#pool-DRIVER-POOL.DEVICE``) asks for it: shown even past the cap.
    wanted = request.GET.get("device") or ""
    if wanted and not any(presenters.pool_device_anchor(d.get("name")) == wanted for d in shown):
        shown += [d for d in devices if presenters.pool_device_anchor(d.get("name")) == wanted]
    return render(
        request,
        "pages/_pool_devices.html",
        {
            "devices": shown,
            "device_count": len(devices),
            "row_prefix": presenters.pool_anchor(driver, pool),
            "wanted": wanted,
        },
    )
