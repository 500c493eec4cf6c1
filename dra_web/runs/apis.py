"""Run endpoints: thin views over services (writes) and selectors (reads)."""

from __future__ import annotations

from django.http import Http404, HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.response import Response
from rest_framework.views import APIView

from dra_web.pagination import Pagination
from dra_web.problems import ProblemSerializer, field_problem, problem
from dra_web.runs import retention, selectors, services
from dra_web.runs.models import Run
from dra_web.runs.serializers import (
    RunCreateSerializer,
    RunDetailSerializer,
    RunSerializer,
    RunUpdateSerializer,
    TraceNodeSerializer,
    VariantResultSerializer,
)
from dra_web.snapshots import selectors as snapshot_selectors
from dra_web.snapshots.apis import problems_response
from dra_web.snapshots.models import Snapshot
from dra_web.snapshots.serializers import VariantCreateSerializer
from dra_web.snapshots.services import SnapshotUploadError

STATUS_VALUES = [s for s, _ in Run.STATUSES]


def _bool_param(value: str | None) -> bool | None:
    if value is None or value == "":
        return None
    lowered = value.lower()
    if lowered in ("1", "true", "yes"):
        return True
    if lowered in ("0", "false", "no"):
        return False
    raise ValueError(value)


class RunListCreateApi(APIView):
    pagination_class = Pagination

    @extend_schema(
        operation_id="runs_list",
        parameters=[
            OpenApiParameter("status", str, enum=STATUS_VALUES),
            OpenApiParameter("snapshot", int),
            OpenApiParameter("owner", str, description="username"),
            OpenApiParameter("has_open_review", bool),
        ],
        responses=RunSerializer(many=True),
    )
    def get(self, request):
        params = request.query_params
        status_value = params.get("status") or None
        if status_value and status_value not in STATUS_VALUES:
            return field_problem("status", f"must be one of {', '.join(STATUS_VALUES)}")
        snapshot = params.get("snapshot") or None
        # isdigit() also admits superscripts ("¹") that int() refuses; ids are ASCII digits.
        if snapshot is not None and not (snapshot.isascii() and snapshot.isdigit()):
            return field_problem("snapshot", "must be a snapshot id")
        try:
            open_review = _bool_param(params.get("has_open_review"))
        except ValueError:
            return field_problem("has_open_review", "must be true or false")
        qs = selectors.run_list(
            owner=params.get("owner") or None,
            status=status_value,
            snapshot=int(snapshot) if snapshot else None,
            has_open_review=open_review,
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(RunSerializer(page, many=True).data)

    @extend_schema(
        operation_id="runs_create", request=RunCreateSerializer, responses={202: RunSerializer}
    )
    def post(self, request):
        serializer = RunCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        snapshot = Snapshot.objects.filter(pk=serializer.validated_data["snapshot"]).first()
        if snapshot is None:
            return field_problem(
                "snapshot", f"snapshot {serializer.validated_data['snapshot']} not found"
            )
        try:
            run = services.start_run(request.user, snapshot, serializer.validated_data["options"])
        except services.RunOptionsError as exc:
            return problem(400, str(exc))  # the message names the option
        run.refresh_from_db()
        return Response(RunSerializer(run).data, status=status.HTTP_202_ACCEPTED)


class RunDetailApi(APIView):
    @extend_schema(operation_id="runs_retrieve", responses=RunDetailSerializer)
    def get(self, request, run_id: int):
        return Response(RunDetailSerializer(selectors.get_run(run_id)).data)

    @extend_schema(
        operation_id="runs_partial_update",
        request=RunUpdateSerializer,
        responses={200: RunSerializer},
        description="Pin or unpin a run: a pinned run is kept past DRA_WEB_RUN_RETENTION_DAYS.",
    )
    def patch(self, request, run_id: int):
        run = selectors.get_run(run_id)
        serializer = RunUpdateSerializer(data=request.data)
        if not serializer.is_valid():
            field, messages = next(iter(serializer.errors.items()))
            return field_problem(field, " ".join(str(m) for m in messages))
        run = retention.set_pinned(run, serializer.validated_data["pinned"])
        return Response(RunSerializer(run).data)

    @extend_schema(operation_id="runs_destroy", responses={204: None})
    def delete(self, request, run_id: int):
        services.delete_run(selectors.get_run(run_id), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class RunCancelApi(APIView):
    @extend_schema(
        operation_id="runs_cancel",
        request=None,
        responses={200: RunSerializer, 409: ProblemSerializer},
        description="Fail a queued or running run as cancelled and stop its worker task.",
    )
    def post(self, request, run_id: int):
        run = selectors.get_run(run_id)
        try:
            run = services.cancel_run(run, request.user)
        except services.RunNotCancellable as exc:
            return problem(status.HTTP_409_CONFLICT, str(exc))
        return Response(RunSerializer(run).data)


def _int_param(value: str | None, field: str) -> int | None:
    if value is None or value == "" or value in ("root", "null"):
        return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{field}: must be a node id") from None


class RunTraceApi(APIView):
    pagination_class = Pagination

    @extend_schema(
        operation_id="runs_trace",
        parameters=[
            OpenApiParameter("parent", str, description="node id, or 'root': that node's children"),
            OpenApiParameter("node", int, description="one node with its path from the root"),
            OpenApiParameter("q", str, description="search labels, devices, claims, NodeClaims"),
            OpenApiParameter("reason", str, description="reason code, e.g. selector, taint"),
            OpenApiParameter("status", str, enum=["ok", "failed", "pruned"]),
            OpenApiParameter("kind", str, description="pod, target, instanceType, ..."),
            OpenApiParameter("download", bool, description="the whole trace document"),
        ],
        responses={
            200: TraceNodeSerializer(many=True),
            400: ProblemSerializer,
            404: ProblemSerializer,
            409: ProblemSerializer,
        },
    )
    def get(self, request, run_id: int):
        run = selectors.get_run(run_id)
        params = request.query_params
        if run.status != Run.SUCCEEDED:
            return problem(
                status.HTTP_409_CONFLICT, f"run {run.pk} is {run.status}: it has no trace"
            )
        if params.get("download"):
            response = HttpResponse(
                selectors.trace_json_bytes(run), content_type="application/json"
            )
            response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-trace.json"'
            return response
        try:
            if "node" in params:
                node_id = _int_param(params.get("node"), "node")
                node = selectors.trace_node(run, node_id) if node_id is not None else None
                if node is None:
                    raise Http404(f"trace node {params.get('node')} not found")
                return Response(node)
            parent_given = "parent" in params
            parent = _int_param(params.get("parent"), "parent") if parent_given else None
        except ValueError as exc:
            return problem(400, str(exc))  # the message names the parameter
        meta = {
            "run": run.pk,
            "traceNodes": run.trace_node_count,
            "omitted": run.trace_omitted,
            "maxNodes": (run.options or {}).get("traceMaxNodes"),
        }
        if parent_given:
            qs = selectors.trace_children_queryset(run, parent)
            meta["parent"] = parent
        elif wanted := selectors.TraceFilter.from_params(params):
            qs = selectors.trace_search_queryset(run, wanted)
        else:
            qs = selectors.trace_page_queryset(run)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        response = paginator.get_paginated_response([n.as_json() for n in page])
        response.data.update(meta)
        return response


class RunDiffApi(APIView):
    @extend_schema(
        operation_id="runs_diff",
        responses={200: OpenApiTypes.OBJECT, 409: ProblemSerializer},
        description="What changed between two finished runs, the same whichever way asked: A "
        "(`before`) is the run of the ancestor snapshot when one derives from the other (a "
        "what-if), else the run queued first. `inputChanges`: the edits from A's snapshot to "
        "B's, each with the `snapshot` that made it and its `author`. `cost`: `{before, after, "
        "delta, unpriced}` in dollars per hour of the new NodeClaims' cheapest offerings their "
        "requirements allow. Then pods placed and unplaced, targets, devices, NodeClaims, and "
        "where the search trees diverge (docs/API.md).",
    )
    def get(self, request, run_id: int, other_id: int):
        a, b = selectors.get_run(run_id), selectors.get_run(other_id)
        for run in (a, b):
            if not run.finished:
                return problem(
                    status.HTTP_409_CONFLICT, f"run {run.pk} is {run.status}: compare finished runs"
                )
        return Response(selectors.diff_runs(a, b))


class SnapshotVariantApi(APIView):
    """A what-if: a snapshot derived from another by JSON patches, and optionally its run."""

    @extend_schema(
        operation_id="snapshots_variants_create",
        request=VariantCreateSerializer,
        responses={201: VariantResultSerializer, 400: ProblemSerializer},
        description="Derive a snapshot from this one by RFC 6902 patches of its objects (its "
        "parent and edits recorded, the caller its author); with `run`, queue a run of it. "
        "400 names the edit whose patch does not apply.",
    )
    def post(self, request, snapshot_id: int):
        parent = snapshot_selectors.get_snapshot(snapshot_id)
        data = request.data if isinstance(request.data, dict) else {}
        if not isinstance(request.data, dict):
            return problem(400, "body: a JSON object with 'edits'")
        run = data.get("run")
        try:
            snapshot, queued = services.start_what_if(
                request.user,
                parent,
                data.get("edits"),
                name=data.get("name") if isinstance(data.get("name"), str) else None,
                run_options=({} if run is True else run) if run not in (None, False) else None,
            )
        except SnapshotUploadError as exc:
            return problems_response(exc)
        except services.RunOptionsError as exc:
            return problem(400, str(exc))
        if queued is not None:
            queued.refresh_from_db()
        body = VariantResultSerializer({"snapshot": snapshot, "run": queued}).data
        return Response(body, status=status.HTTP_201_CREATED)
