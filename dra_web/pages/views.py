"""The debugger's pages (CONTRACT section 7). Thin: parse the request, read the page's model
(run_page, diff_page, dashboard_page, snapshot_page; selectors), write via services, render."""

from __future__ import annotations

import json
from pathlib import Path

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from dra_web.pages import run_page
from dra_web.pages import selectors as page_selectors
from dra_web.pages.dashboard_page import DashboardQuery, dashboard_page
from dra_web.pages.diff_page import diff_page
from dra_web.pages.forms import CommentForm, RunForm, UploadForm
from dra_web.pages.rendering import reads_result, render_released
from dra_web.pages.snapshot_page import snapshot_page
from dra_web.reviews import selectors as review_selectors
from dra_web.reviews import services as review_services
from dra_web.runs import retention
from dra_web.runs import selectors as run_selectors
from dra_web.runs import services as run_services
from dra_web.snapshots import selectors as snapshot_selectors
from dra_web.snapshots import services as snapshot_services

TREE_PAGE = 200

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
    query = DashboardQuery(
        review=request.GET.get("review") or "",
        status=request.GET.get("status") or "",
        mine=request.GET.get("mine") == "1",
        runs_page=request.GET.get("page"),
        snapshots_page=request.GET.get("spage"),
    )
    return {
        **dashboard_page(request.user, query),
        "upload_form": upload_form or UploadForm(),
        "run_form": run_form or RunForm(),
        "upload_problems": upload_problems or [],
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
        return render(request, "pages/dashboard.html", ctx, status=e.status)
    if snapshot.existing:
        messages.info(request, f"This content was already uploaded as “{snapshot.name}”.")
    else:
        messages.success(request, f"Uploaded “{snapshot.name}”: {snapshot.object_total} objects.")
    return redirect("pages:snapshot", snapshot_id=snapshot.pk)


@login_required
@require_POST
def start_run(request):
    snapshot = snapshot_selectors.get_snapshot(request.POST.get("snapshot") or 0)
    form = RunForm(request.POST, nodes=page_selectors.node_names(snapshot))
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
    run = run_selectors.get_run(run_id, with_result=False)
    run.has_open_review = review_selectors.has_open_review(run)
    return render(request, "pages/_run_row.html", {"run": run})


@login_required
@require_GET
def run_status(request, run_id):
    run = run_selectors.get_run(run_id, with_result=False)
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
    ctx = snapshot_page(snapshot, request.GET.get("kind") or None, request.GET.get("page"))
    return render(request, "pages/snapshot.html", ctx)


# --- run ---------------------------------------------------------------------------------------


@login_required
@require_GET
@reads_result
def run_detail(request, run_id):
    numbers = run_page.RunPageNumbers(
        placements=request.GET.get("ppage"),
        reviews=request.GET.get("rpage"),
        pools=request.GET.get("olpage"),
        node_claims=request.GET.get("ncpage"),
    )
    run = run_selectors.get_run(run_id)
    return render_released(request, "pages/run.html", run_page.run_page(run, numbers))


@login_required
@require_GET
def diff_pick(request, run_id):
    other = request.GET.get("other")
    if not other:
        return redirect("pages:run", run_id=run_id)
    return redirect("pages:diff", run_a=run_id, run_b=int(other))


@login_required
@require_GET
@reads_result
def run_diff(request, run_a, run_b):
    a = run_selectors.get_run(run_a)
    b = run_selectors.get_run(run_b)
    return render_released(request, "pages/diff.html", diff_page(a, b))


# --- what-if ------------------------------------------------------------------------------------


def _what_if(request, parent, edits, options, back_url: str, compare_with=None):
    """Make the derived snapshot and run it; the diff against ``compare_with`` when given, else
    the new run's page. A refused edit goes back with the message."""
    try:
        _, run = run_services.start_what_if(
            request.user, parent, edits, run_options={"options": options}
        )
    except (snapshot_services.SnapshotUploadError, run_services.RunOptionsError) as exc:
        problems = getattr(exc, "problems", None) or [str(exc)]
        messages.error(request, "What-if not made: " + "; ".join(problems))
        return redirect(back_url)
    if compare_with is not None:
        return redirect("pages:diff", run_a=compare_with.pk, run_b=run.pk)
    return redirect("pages:run", run_id=run.pk)


@login_required
@require_POST
def try_fix(request, run_id):
    """ "Try this fix": the run's snapshot with a suggestion's edits, run with the same options,
    compared with this run."""
    run = run_selectors.get_run(run_id)
    back = reverse("pages:run", args=[run.pk])
    try:
        edits = json.loads(request.POST.get("edits") or "")
    except ValueError:
        messages.error(request, "What-if not made: edits: not JSON")
        return redirect(back)
    return _what_if(request, run.snapshot, edits, run.options, back, compare_with=run)


@login_required
@require_POST
def edit_object(request, snapshot_id):
    """The edit box of the snapshot page: one object as edited YAML, made into a patch, run as
    a what-if and compared with the latest succeeded run of this snapshot (when there is one)."""
    snapshot = snapshot_selectors.get_snapshot(snapshot_id)
    back = reverse("pages:snapshot", args=[snapshot.pk])
    ref = request.POST.get("object") or ""
    try:
        patch = page_selectors.object_patch(snapshot, ref, request.POST.get("yaml") or "")
    except ValueError as exc:
        messages.error(request, f"What-if not made: {exc}")
        return redirect(back)
    latest = run_selectors.latest_succeeded_run(snapshot)
    options = latest.options if latest is not None else {}
    return _what_if(
        request, snapshot, [{"object": ref, "patch": patch}], options, back, compare_with=latest
    )


# --- review ------------------------------------------------------------------------------------


@login_required
@reads_result
def pod_review(request, run_id, namespace, name):
    key = f"{namespace}/{name}"
    found = run_page.pod_of_run(run_id, key)
    run = found.run
    pod = run_page.review_pod(found, reverse("pages:run", args=[run.pk]))
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
    return render_released(
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
    run = run_selectors.get_run(run_id, with_result=False)
    page = run_selectors.trace_children_window(
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
    run = run_selectors.get_run(run_id, with_result=False)
    node = page_selectors.trace_node_detail(run, node_id)
    if node is None:
        raise Http404("no such trace node")
    return JsonResponse(node)


@login_required
@require_GET
def tree_reveal(request, run_id, node_id):
    run = run_selectors.get_run(run_id, with_result=False)
    path = run_selectors.trace_reveal(run, node_id, page=TREE_PAGE)
    if not path:
        raise Http404("no such trace node")
    return JsonResponse({"path": path})


@login_required
@require_GET
def tree_search(request, run_id):
    run = run_selectors.get_run(run_id, with_result=False)
    found = run_selectors.trace_search_page(
        run,
        run_selectors.TraceFilter.from_params(request.GET),
        limit=_query_int(request, "limit", 100, 1, 500),
    )
    return JsonResponse(found)


@login_required
@require_GET
def tree_overview(request, run_id):
    run = run_selectors.get_run(run_id, with_result=False)
    return JsonResponse(run_selectors.trace_overview(run))


# --- downloads, partials and actions of the run page -----------------------------------------


def _attachment(body: bytes | str, content_type: str, filename: str) -> HttpResponse:
    response = HttpResponse(body, content_type=content_type)
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


@login_required
@require_GET
def download_result(request, run_id):
    run = run_page.finished_run(run_id)
    return _attachment(
        run_selectors.result_json_bytes(run), "application/json", f"run-{run.pk}-result.json"
    )


@login_required
@require_GET
def download_trace(request, run_id):
    run = run_page.finished_run(run_id)
    if run.trace_blob is None:
        raise Http404(f"run #{run.pk} recorded no trace")
    return _attachment(
        run_selectors.trace_json_bytes(run), "application/json", f"run-{run.pk}-trace.json"
    )


@login_required
@require_GET
def download_node_claims(request, run_id):
    run = run_page.finished_run(run_id)
    return _attachment(
        run_page.node_claims_yaml(run, None), "application/yaml", f"run-{run.pk}-nodeclaims.yaml"
    )


@login_required
@require_GET
def download_node_claim(request, run_id, name):
    run = run_page.finished_run(run_id)
    return _attachment(run_page.node_claims_yaml(run, name), "application/yaml", f"{name}.yaml")


@login_required
@require_GET
@reads_result
def pod_reasons(request, run_id, namespace, name):
    """Every target that refused a pod, a page at a time (htmx partial of the run page)."""
    found = run_page.pod_of_run(run_id, f"{namespace}/{name}")
    ctx = run_page.pod_reasons(found, request.GET.get("page"))
    return render_released(request, "pages/_reason_list.html", ctx)


@login_required
@require_GET
@reads_result
def pod_explanation(request, run_id, namespace, name):
    """A failed pod's funnel, grouped reasons and suggestions (htmx partial of the run page,
    loaded when the pod scrolls into view)."""
    found = run_page.pod_of_run(run_id, f"{namespace}/{name}")
    where = "placements" if request.GET.get("where") == "placements" else "summary"
    ctx = run_page.pod_explanation(found, reverse("pages:run", args=[found.run.pk]))
    return render_released(request, "pages/_failure_body.html", {**ctx, "where": where})


@login_required
@require_POST
def cancel_run(request, run_id):
    """Cancel a queued or running run (the runs service stops its worker)."""
    run = run_selectors.get_run(run_id)
    try:
        run_services.cancel_run(run, request.user)
    except run_services.RunNotCancellable as e:  # finished meanwhile: say so, no 500
        messages.error(request, f"Could not cancel run #{run.pk}: {e}")
    else:
        messages.info(request, f"Run #{run.pk} is being cancelled.")
    return redirect("pages:run", run_id=run.pk)


@login_required
@require_GET
@reads_result
def pool_devices(request, run_id):
    """One in-cluster pool's devices (htmx partial of the Pools tab)."""
    run = run_page.finished_run(run_id)
    ctx = run_page.pool_devices(
        run,
        request.GET.get("driver") or "",
        request.GET.get("pool") or "",
        # A link to one device (``#pool-DRIVER-POOL.DEVICE``) asks for it.
        request.GET.get("device") or "",
    )
    return render_released(request, "pages/_pool_devices.html", ctx)


# --- retention -------------------------------------------------------------------------------


@login_required
@require_POST
def pin_run(request, run_id):
    """Pin or unpin a run (kept past DRA_WEB_RUN_RETENTION_DAYS), then back to its page."""
    run = run_selectors.get_run(run_id)
    pinned = request.POST.get("pinned") == "true"
    retention.set_pinned(run, pinned)
    messages.success(request, f"Run #{run.pk} is {'pinned' if pinned else 'no longer pinned'}.")
    return redirect("pages:run", run_id=run.pk)
