"""A run's result and the blobs (snapshots, traces, page facts) read back exactly as written:
the blobs are read by orjson, which reads an integer past 64 bits as a float, and a result
must not lose one either."""

from __future__ import annotations

import pytest

from dra_web import blobs
from dra_web.runs.models import Run
from dra_web.snapshots.services import create_snapshot
from tests.pages.builders import FIXTURE

pytestmark = pytest.mark.django_db


def test_a_result_reads_back_exactly_as_stored(user):
    snapshot = create_snapshot(user, [(FIXTURE.name, FIXTURE.read_bytes())], "gpu-training")
    result = {
        "schemaVersion": "v1",
        "pods": [{"pod": "ml/train-0", "scheduled": False, "error": "0/2 nodes are available"}],
        # A 2**70-byte capacity in a warning's numbers, and the 64-bit edge.
        "stats": {"pods": 1, "failed": 1, "bytes": 2**70, "edge": 2**64 - 1, "share": 0.25},
    }
    run = Run.objects.create(snapshot=snapshot, owner=user, status=Run.SUCCEEDED, result=result)
    stored = Run.objects.get(pk=run.pk).result
    assert stored == result
    assert type(stored["stats"]["bytes"]) is int


def test_a_blob_reads_back_exactly_as_packed():
    value = {"attributes": {"memory": {"int": 2**70}}, "index": 3, "label": "\udc80"}
    assert blobs.unpack(blobs.pack(value)) == value
