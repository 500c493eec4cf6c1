"""A run builds its snapshot from the documents decoded at upload, not by parsing
the stored YAML again, and decides exactly as a run on the files would."""

from __future__ import annotations

from pathlib import Path

import pytest

from allocator import snapshot as loader
from allocator.simulation import SimulationOptions, simulate
from bench.workloads import synthetic_cluster, to_yaml
from dra_web.snapshots import services

pytestmark = pytest.mark.django_db

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").glob("*.yaml"))


def _decisions(loaded) -> list:
    result = simulate(loaded, SimulationOptions(trace=False)).result
    return [
        (p["pod"], p["scheduled"], p["target"], p["claims"], p["error"]) for p in result["pods"]
    ]


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_stored_documents_decide_like_the_files(user, path):
    files = [(path.name, path.read_bytes())]
    snap = services.create_snapshot(user, files)
    from_files = loader.load_files(files)
    from_documents = services.load_snapshot(snap)
    assert from_documents.documents == from_files.documents
    assert from_documents.object_counts() == from_files.object_counts()
    assert _decisions(from_documents) == _decisions(from_files)


def test_a_run_does_not_parse_the_files_again(user, monkeypatch):
    snap = services.create_snapshot(user, [("c.yaml", to_yaml(synthetic_cluster(nodes=3)))])

    def no_parse(files):
        raise AssertionError("the stored files were parsed again")

    monkeypatch.setattr(loader, "load_files", no_parse)
    loaded = services.load_snapshot(snap)
    assert len(loaded.nodes) == 3 and len(loaded.pods) == 3


def test_documents_blob_is_the_canonical_json_the_hash_covers(user):
    snap = services.create_snapshot(user, [("c.yaml", to_yaml(synthetic_cluster()))])
    loaded = loader.load_documents(snap.documents())
    assert services.content_hash(loaded) == snap.content_hash


def test_problems_of_stored_documents_name_their_place():
    with pytest.raises(loader.SnapshotError) as err:
        loader.load_documents([("Node", {"apiVersion": "v1", "kind": "Node", "metadata": {}})])
    assert err.value.problems == ["stored doc 1 Node <unnamed>: metadata.name: required"]


def test_warnings_of_skipped_documents_reach_the_result(user):
    text = (
        to_yaml(synthetic_cluster())
        + "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
    )
    snap = services.create_snapshot(user, [("c.yaml", text)])
    files = loader.load_files([("c.yaml", text)])
    assert files.warnings and services.load_snapshot(snap).warnings == files.warnings


def test_an_upload_as_kubectl_exports_it_is_read_on_the_fast_path():
    """UIDs, managedFields and CEL selectors are what real uploads are made of; the fast
    YAML reader takes them and reads them as PyYAML would."""
    import yaml

    from allocator.snapshot import decode
    from bench.workloads import as_exported

    docs = as_exported(synthetic_cluster(nodes=20, running_pods=40, pending_pods=20))
    assert any(d["metadata"]["uid"][0] == "0" for d in docs)  # the leading zeros are there
    text = to_yaml(docs)
    assert not decode._needs_pyyaml(text)
    fast = decode._fast_yaml_docs(text)
    assert fast == list(yaml.safe_load_all(text))
