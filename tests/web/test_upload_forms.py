"""What an upload stores of its documents and files (content hash, compressed documents and
files) is the same whether a forked child wrote it while the snapshot was built or the
request wrote it after: byte for byte, for every way a document may not be kept as decoded."""

from __future__ import annotations

import itertools
import json
import zlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from allocator import snapshot as loader
from bench.workloads import synthetic_cluster, to_yaml
from dra_web import forked
from dra_web.snapshots import services

pytestmark = pytest.mark.django_db


def _cluster() -> list[dict]:
    return synthetic_cluster(nodes=4, running_pods=8, pending_pods=4)


def _skipped_kind() -> list[dict]:
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "gpu-feature-flags"}}
    return [*_cluster(), config]


def _priced_in_exponent() -> list[dict]:
    # orjson writes 1e-05 where the standard library writes 1e-05 too, but 0.00001 otherwise:
    # such a number sends the documents to canonical's careful reading.
    docs = _cluster()
    instance_type = next(d for d in docs if d["kind"] == "InstanceType")
    instance_type["spec"]["offerings"][0]["price"] = 0.00001
    return docs


def _kwok_instance_type() -> list[dict]:
    # Karpenter's kwok instance type list is converted into InstanceType documents.
    kwok = {
        "name": "g6e.2xlarge",
        "offerings": [
            {
                "Price": 2.24,
                "Available": True,
                "Requirements": [
                    {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot"]},
                    {
                        "key": "topology.kubernetes.io/zone",
                        "operator": "In",
                        "values": ["us-west-2a"],
                    },
                ],
            }
        ],
        "architecture": "amd64",
        "operatingSystems": ["linux"],
        "resources": {"cpu": "8", "memory": "64Gi", "pods": "58"},
    }
    return [*_cluster(), kwok]


def _forms_in_the_request(user, files, monkeypatch) -> services.StoredForms:
    with monkeypatch.context() as m:
        m.setattr(forked, "fork_aside", lambda compute: None)
        snap = services.create_snapshot(user, files, "in the request")
    return services.StoredForms(
        snap.content_hash, snap.documents_blob, snap.files_blob, snap.object_index
    )


@pytest.mark.parametrize(
    "documents, by_the_child",
    [
        (_cluster, True),
        (_skipped_kind, False),
        (_priced_in_exponent, False),
        (_kwok_instance_type, False),
    ],
    ids=["kept-as-decoded", "skipped-kind", "careful-reading", "converted"],
)
def test_the_stored_forms_do_not_depend_on_who_wrote_them(
    user, django_user_model, monkeypatch, documents, by_the_child
):
    monkeypatch.setattr(services, "_FORMS_ASIDE_FROM", 0)
    files = [("cluster.yaml", to_yaml(documents()).encode())]
    written_here = []
    in_the_request = services._stored_forms

    def watched(loaded, texts):
        written_here.append(len(loaded.documents))
        return in_the_request(loaded, texts)

    monkeypatch.setattr(services, "_stored_forms", watched)
    snap = services.create_snapshot(user, files, "aside")
    assert bool(written_here) is not by_the_child
    other = django_user_model.objects.create_user("reviewer")
    expected = _forms_in_the_request(other, files, monkeypatch)
    assert snap.content_hash == expected.content_hash
    assert bytes(snap.documents_blob) == bytes(expected.documents_blob)
    assert bytes(snap.files_blob) == bytes(expected.files_blob)
    assert snap.object_index == expected.object_index
    stored = json.loads(zlib.decompress(bytes(snap.documents_blob)))
    assert stored == [[k, d] for k, d in loader.load_files(files).documents]


# yaml-rs reads ``yes`` as a string, which the Node refuses; YAML 1.1 (Kubernetes' go-yaml,
# PyYAML) reads true.
_NODE_UNSCHEDULABLE_YES = (
    "apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-node-9\nspec:\n  unschedulable: yes\n"
)


@pytest.mark.parametrize("child", [True, False], ids=["child", "no-child"])
def test_a_build_the_verdict_overturns_is_built_again_from_the_careful_reading(
    user, monkeypatch, child
):
    """The snapshot is built from yaml-rs' objects before its verdict; here that build fails,
    the verdict (the child's, or the request's without one) sends the file to PyYAML, and
    the snapshot is built again as a plain load builds it."""
    monkeypatch.setattr(services, "_FORMS_ASIDE_FROM", 0)
    if not child:
        monkeypatch.setattr(forked, "fork_aside", lambda compute: None)
    files = [("cluster.yaml", (to_yaml(_cluster()) + "---\n" + _NODE_UNSCHEDULABLE_YES).encode())]
    snap = services.create_snapshot(user, files, "overturned")
    loaded = loader.load_documents(snap.documents())
    assert loaded.nodes["gpu-node-9"].unschedulable is True
    stored = json.loads(zlib.decompress(bytes(snap.documents_blob)))
    assert stored == [[k, d] for k, d in loader.load_files(files).documents]
    assert snap.content_hash == services.content_hash(loaded)


@pytest.mark.parametrize("child", [True, False], ids=["child", "no-child"])
def test_a_file_past_the_bounds_is_refused_as_a_plain_load_refuses_it(user, monkeypatch, child):
    monkeypatch.setattr(services, "_FORMS_ASIDE_FROM", 0)
    if not child:
        monkeypatch.setattr(forked, "fork_aside", lambda compute: None)
    text = _NODE_UNSCHEDULABLE_YES.replace("unschedulable: yes", "unschedulable: .inf")
    files = [("cluster.yaml", (to_yaml(_cluster()) + "---\n" + text).encode())]
    with pytest.raises(loader.SnapshotError) as plain:
        loader.load_files(files)
    with pytest.raises(services.SnapshotUploadError) as err:
        services.create_snapshot(user, files, "past the bounds")
    assert err.value.status == 400
    assert err.value.problems == plain.value.problems


def test_a_failed_child_leaves_the_request_to_write_them(user, monkeypatch):
    monkeypatch.setattr(services, "_FORMS_ASIDE_FROM", 0)

    def fails(objects, texts):
        raise MemoryError("the child ran out of memory")

    monkeypatch.setattr(services, "_forms_as_decoded", fails)
    files = [("cluster.yaml", to_yaml(_cluster()).encode())]
    snap = services.create_snapshot(user, files, "child failed")
    loaded = loader.load_documents(snap.documents())
    assert snap.content_hash == services.content_hash(loaded)
    assert len(loaded.nodes) == 4


def test_an_upload_refused_while_the_child_writes_stops_the_child(user, monkeypatch, forks):
    monkeypatch.setattr(services, "_FORMS_ASIDE_FROM", 0)
    docs = _cluster()
    next(d for d in docs if d["kind"] == "Node")["metadata"]["name"] = "Not_A_DNS_Name"
    with pytest.raises(services.SnapshotUploadError) as err:
        services.create_snapshot(user, [("cluster.yaml", to_yaml(docs).encode())])
    assert "Not_A_DNS_Name" in str(err.value)
    assert len(forks.pids) == 1
    assert forks.reaped()  # no child left behind


def test_small_uploads_fork_no_child(user, monkeypatch):
    def no_fork(compute):
        raise AssertionError("a child was forked for a small upload")

    monkeypatch.setattr(forked, "fork_aside", no_fork)
    snap = services.create_snapshot(user, [("cluster.yaml", to_yaml(_cluster()))])
    assert snap.content_hash


def test_a_loader_bug_is_a_refused_upload_not_a_server_error(user, monkeypatch):
    def broken(decoded):
        raise KeyError("allocatedResourcesStatus")

    monkeypatch.setattr(loader, "load_decoded", broken)
    with pytest.raises(services.SnapshotUploadError) as err:
        services.create_snapshot(user, [("cluster.yaml", to_yaml(_cluster()))])
    assert err.value.status == 400
    assert "could not read the snapshot" in str(err.value)


_OWNERS = itertools.count()  # each example's uploads by owners of their own

# Values a document may hold that the stored forms must write alike: numbers orjson writes
# otherwise than the standard library, text a database refuses, YAML 1.1 words.
_VALUES = st.one_of(
    st.sampled_from(["on", "yes", "0755", "1:30", "\x00", "é", "", "~"]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.text(max_size=12),
)


@settings(
    max_examples=25,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    annotations=st.dictionaries(st.text(min_size=1, max_size=8), _VALUES, max_size=3),
    extra=st.sampled_from([None, "skipped-kind", "converted"]),
    as_json=st.booleans(),
)
def test_the_child_and_the_request_store_the_same_for_any_annotations(
    user, django_user_model, monkeypatch, annotations, extra, as_json
):
    monkeypatch.setattr(services, "_FORMS_ASIDE_FROM", 0)
    docs = {None: _cluster, "skipped-kind": _skipped_kind, "converted": _kwok_instance_type}[
        extra
    ]()
    docs[0]["metadata"]["annotations"] = annotations
    text = json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}) if as_json else None
    files = [("cluster.json" if as_json else "cluster.yaml", text or to_yaml(docs))]
    outcomes = []
    for who, fork in (("child", forked.fork_aside), ("request", lambda compute: None)):
        owner = django_user_model.objects.create_user(f"{who}-{next(_OWNERS)}")
        with monkeypatch.context() as m:
            m.setattr(forked, "fork_aside", fork)
            try:
                snap = services.create_snapshot(owner, files)
            except services.SnapshotUploadError as err:
                outcomes.append(("refused", err.problems))
                continue
        outcomes.append(
            (
                snap.content_hash,
                bytes(snap.documents_blob),
                bytes(snap.files_blob),
                snap.object_index,
            )
        )
    assert outcomes[0] == outcomes[1]
