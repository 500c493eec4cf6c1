"""allocator/nodealike.py: which existing nodes the count stage cannot tell apart."""

from __future__ import annotations

import json

from allocator.model import DeviceID
from allocator.nodealike import NodeAlikeIndex
from allocator.pools import SliceUniverse
from allocator.snapshot import load_files
from allocator.tracker import AllocationTracker
from bench.workloads import synthetic_cluster

DRIVER = "gpu.nvidia.com"
READS_MODEL = frozenset({(DRIVER, "model")})


def _cluster(docs: list[dict]):
    snapshot = load_files([("cluster.json", json.dumps(docs))])
    universe = SliceUniverse(snapshot.resource_slices)
    names = sorted(snapshot.nodes)
    return universe, names


def _h100_nodes(nodes: int = 3) -> list[dict]:
    return synthetic_cluster(nodes=nodes, gpus_per_node=4, running_pods=0, pending_pods=0)


def _key(index, universe, node, tracker=None, read=READS_MODEL):
    pools = universe.gather(node, [])
    return index.node(node, pools, tracker or AllocationTracker(), read)


def test_nodes_whose_gpus_differ_in_uuids_only_are_alike() -> None:
    universe, (a, b, c) = _cluster(_h100_nodes())
    index = NodeAlikeIndex()
    first, second = _key(index, universe, a), _key(index, universe, b)
    assert first is not None and second is not None
    assert first.key == second.key
    # Each node's own devices, in search order, to map a shared funnel's examples to.
    assert first.devices[0] == f"{DRIVER}/{a}/gpu-0"
    assert second.devices[0] == f"{DRIVER}/{b}/gpu-0"
    assert a in first.names and f"{DRIVER}/{a}/gpu-0" not in first.names


def test_a_read_attribute_tells_nodes_apart_and_an_unread_one_does_not() -> None:
    docs = _h100_nodes()
    slices = [d for d in docs if d["kind"] == "ResourceSlice"]
    slices[1]["spec"]["devices"][0]["attributes"]["model"] = {"string": "A100"}
    universe, (a, b, _) = _cluster(docs)
    index = NodeAlikeIndex()
    assert _key(index, universe, a).key != _key(index, universe, b).key
    reads_product = frozenset({(DRIVER, "productName")})
    assert (
        _key(index, universe, a, read=reads_product).key
        == _key(index, universe, b, read=reads_product).key
    )


def test_a_node_holding_a_device_or_read_as_a_whole_runs_its_own_count_stage() -> None:
    universe, (a, _, _) = _cluster(_h100_nodes())
    index = NodeAlikeIndex()
    tracker = AllocationTracker()
    tracker.record(f"node/{a}", "", [DeviceID(DRIVER, a, "gpu-2")], [])
    assert _key(index, universe, a, tracker=tracker) is None
    assert _key(index, universe, a, read=None) is None


def test_slices_skipping_node_operations_are_not_shared() -> None:
    docs = _h100_nodes()
    slices = [d for d in docs if d["kind"] == "ResourceSlice"]
    slices[0]["spec"]["skipNodeOperations"] = ["NodePrepareResources", "NodeUnprepareResources"]
    universe, (a, b, _) = _cluster(docs)
    index = NodeAlikeIndex()
    assert _key(index, universe, a) is None
    assert _key(index, universe, b) is not None
