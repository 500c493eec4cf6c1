"""Snapshot endpoints: thin views over services (writes) and selectors (reads)."""

from __future__ import annotations

import json

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.exceptions import ParseError
from rest_framework.parsers import BaseParser, JSONParser, MultiPartParser
from rest_framework.response import Response
from rest_framework.views import APIView

from dra_web.pagination import Pagination
from dra_web.problems import ProblemSerializer, problem
from dra_web.snapshots import selectors, services
from dra_web.snapshots.serializers import (
    ClusterImportSerializer,
    SnapshotDetailSerializer,
    SnapshotObjectSerializer,
    SnapshotSerializer,
    SnapshotUploadResultSerializer,
    SnapshotUploadSerializer,
)


class RawBodyParser(BaseParser):
    """Any non-multipart body is the snapshot itself (YAML or JSON), kept as bytes."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return stream.read() if stream is not None else b""


def problems_response(exc: services.SnapshotUploadError) -> Response:
    detail = (
        "snapshot too large"
        if exc.status == status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
        else "snapshot rejected: nothing was stored"
    )
    if len(exc.problems) == 1:
        detail = f"{detail}: {exc.problems[0]}"
    return problem(exc.status, detail, exc.problems)


def _too_large(length: int | None = None) -> Response:
    limit = settings.DRA_WEB_MAX_UPLOAD_BYTES
    size = f"{length} bytes" if length is not None else "the upload"
    message = f"{size} is larger than the limit of {limit} bytes (DRA_WEB_MAX_UPLOAD_BYTES)"
    return problem(
        status.HTTP_413_REQUEST_ENTITY_TOO_LARGE, f"snapshot too large: {message}", [message]
    )


def _content_length(request) -> int | None:
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return None


def _files_from_request(request) -> tuple[list[tuple[str, bytes]], str | None]:
    """(files, name) from multipart ``file`` fields or from a raw body."""
    if request.content_type.startswith("multipart/"):
        uploads = request.FILES.getlist("file")
        if not uploads:
            raise services.SnapshotUploadError("multipart upload without a 'file' field")
        files = [(u.name or f"file-{i}", u.read()) for i, u in enumerate(uploads, 1)]
        return files, request.data.get("name") or request.query_params.get("name")
    body = request.data if isinstance(request.data, bytes) else b""
    if not body.strip():
        raise services.SnapshotUploadError(
            "empty body: send the snapshot as a YAML or JSON body or as multipart 'file'"
        )
    ext = "json" if "json" in (request.content_type or "") else "yaml"
    return [(request.query_params.get("filename") or f"upload.{ext}", body)], (
        request.query_params.get("name")
    )


class SnapshotListCreateApi(APIView):
    parser_classes = [MultiPartParser, RawBodyParser]
    pagination_class = Pagination

    @extend_schema(
        operation_id="snapshots_list",
        parameters=[
            OpenApiParameter("owner", str, description="username"),
            OpenApiParameter("q", str, description="name or file name contains"),
        ],
        responses=SnapshotSerializer(many=True),
    )
    def get(self, request):
        qs = selectors.snapshot_list(
            owner=request.query_params.get("owner") or None, q=request.query_params.get("q")
        )
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(qs, request, view=self)
        return paginator.get_paginated_response(SnapshotSerializer(page, many=True).data)

    @extend_schema(
        operation_id="snapshots_create",
        request={
            "multipart/form-data": SnapshotUploadSerializer,
            "application/yaml": OpenApiTypes.STR,
            "application/json": OpenApiTypes.OBJECT,
        },
        parameters=[OpenApiParameter("name", str, description="snapshot name (raw body)")],
        responses={
            201: SnapshotUploadResultSerializer,
            400: ProblemSerializer,
            413: ProblemSerializer,
        },
    )
    def post(self, request):
        length = _content_length(request)
        # Multipart framing adds a little; the exact file sizes are checked by the service.
        if length and length > settings.DRA_WEB_MAX_UPLOAD_BYTES + 64 * 1024:
            return _too_large(length)
        try:
            files, name = _files_from_request(request)
            snapshot = services.create_snapshot(request.user, files, name)
        except services.SnapshotUploadError as exc:
            return problems_response(exc)
        except RequestDataTooBig:
            return _too_large()
        # docs/API.md: always 201; a recognised upload says so with `existing: true`.
        return Response(
            SnapshotUploadResultSerializer(snapshot).data, status=status.HTTP_201_CREATED
        )


class SnapshotDetailApi(APIView):
    @extend_schema(operation_id="snapshots_retrieve", responses=SnapshotDetailSerializer)
    def get(self, request, snapshot_id: int):
        return Response(SnapshotDetailSerializer(selectors.get_snapshot(snapshot_id)).data)

    @extend_schema(operation_id="snapshots_destroy", responses={204: None})
    def delete(self, request, snapshot_id: int):
        services.delete_snapshot(selectors.get_snapshot(snapshot_id), request.user)
        return Response(status=status.HTTP_204_NO_CONTENT)


class SnapshotObjectsApi(APIView):
    pagination_class = Pagination

    @extend_schema(
        operation_id="snapshots_objects",
        parameters=[OpenApiParameter("kind", str, description="e.g. ResourceSlice")],
        responses=SnapshotObjectSerializer(many=True),
    )
    def get(self, request, snapshot_id: int):
        snapshot = selectors.get_snapshot(snapshot_id)
        objects = selectors.snapshot_objects(snapshot, request.query_params.get("kind") or None)
        paginator = self.pagination_class()
        page = paginator.paginate_queryset(objects, request, view=self)
        return paginator.get_paginated_response(page)


class KubeconfigParser(BaseParser):
    """A raw kubeconfig (YAML) body for the import endpoint."""

    media_type = "*/*"

    def parse(self, stream, media_type=None, parser_context=None):
        return {"kubeconfig": (stream.read() if stream is not None else b"").decode("utf-8")}


def _text(value) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, dict | list):
        return json.dumps(value)
    return str(value)


class ClusterImportApi(APIView):
    parser_classes = [JSONParser, MultiPartParser, KubeconfigParser]

    @extend_schema(
        operation_id="snapshots_import",
        request={
            "application/json": ClusterImportSerializer,
            "multipart/form-data": ClusterImportSerializer,
            "application/yaml": OpenApiTypes.STR,
        },
        parameters=[
            OpenApiParameter("context", str, description="kubeconfig context"),
            OpenApiParameter("name", str, description="snapshot name"),
        ],
        responses={201: SnapshotUploadResultSerializer, 400: ProblemSerializer},
    )
    def post(self, request):
        try:
            data = request.data
        except ParseError as exc:
            return problem(status.HTTP_400_BAD_REQUEST, f"body: {exc.detail}")
        params = request.query_params
        kubeconfig = data.get("kubeconfig")
        if kubeconfig is None and isinstance(data, dict) and "clusters" in data:
            kubeconfig = dict(data)  # a kubeconfig posted as JSON, not wrapped
        if "kubeconfig" in request.FILES:
            kubeconfig = request.FILES["kubeconfig"].read().decode("utf-8", "replace")
        if not kubeconfig:
            return problem(status.HTTP_400_BAD_REQUEST, "kubeconfig: required")
        instance_types: list[tuple[str, bytes | str]] = []
        for i, f in enumerate(request.FILES.getlist("instanceTypes"), 1):
            instance_types.append((f.name or f"instance-types-{i}.yaml", f.read()))
        extra = data.get("instanceTypes") if not request.FILES.getlist("instanceTypes") else None
        if extra:
            texts = extra if isinstance(extra, list) else [extra]
            instance_types += [
                (f"instance-types-{i}.yaml", _text(t)) for i, t in enumerate(texts, 1)
            ]
        try:
            snapshot = services.import_cluster(
                request.user,
                kubeconfig if isinstance(kubeconfig, dict) else _text(kubeconfig),
                context=data.get("context") or params.get("context") or None,
                name=data.get("name") or params.get("name") or None,
                instance_type_files=instance_types,
            )
        except services.SnapshotUploadError as exc:
            return problems_response(exc)
        # docs/API.md: always 201; a recognised upload says so with `existing: true`.
        return Response(
            SnapshotUploadResultSerializer(snapshot).data, status=status.HTTP_201_CREATED
        )
