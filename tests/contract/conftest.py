"""Contract checks (../shared/CONTRACT.md) through the public edges only.

Builders make small realistic snapshots; ``cli`` runs ``python -m allocator`` in-process through
``allocator.cli.main`` (the same argv, stdout, stderr and exit status as the subprocess, which a
few tests in test_contract_cli.py run for real).
"""

from __future__ import annotations

import io
import json
import subprocess
import sys
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
DEMO = EXAMPLES / "demo-snapshot.yaml"

ALL_GATES = [
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRADeviceBindingConditions",
    "DRAPrioritizedList",
    "DRAAdminAccess",
    "DRAPartitionableDevices",
    "DRADeviceCompatibilityGroups",
    "DRAConsumableCapacity",
    "DRAListTypeAttributes",
    "DRANodeAllocatableResources",
    "DRAOptionalNodeOperations",
    "DRAResourcePoolStatus",
    "DRAExtendedResource",
]


@dataclass
class Run:
    status: int
    stdout: str
    stderr: str

    @cached_property
    def doc(self) -> dict:
        return json.loads(self.stdout)

    def pod(self, key: str) -> dict:
        for entry in self.doc["pods"]:
            if entry["pod"] == key:
                return entry
        raise AssertionError(f"{key} not in result pods {[p['pod'] for p in self.doc['pods']]}")


def cli(*argv: str) -> Run:
    from allocator.cli import main

    out, err = io.StringIO(), io.StringIO()
    status = main([str(a) for a in argv], stdout=out, stderr=err)
    return Run(status, out.getvalue(), err.getvalue())


def subprocess_cli(*argv: str) -> Run:
    proc = subprocess.run(
        [sys.executable, "-m", "allocator", *map(str, argv)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
    )
    return Run(proc.returncode, proc.stdout, proc.stderr)


def write_yaml(tmp_path: Path, docs: list[dict], name: str = "snapshot.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def simulate(tmp_path: Path, docs: list[dict], *flags: str) -> Run:
    path = write_yaml(tmp_path, docs)
    run = cli("simulate", path, "--json", *flags)
    assert run.status == 0, run.stderr
    return run


# --- builders -------------------------------------------------------------------------------


def namespace(name: str, labels: dict | None = None) -> dict:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": labels or {}},
    }


def node(
    name: str,
    cpu: str = "16",
    memory: str = "64Gi",
    labels: dict | None = None,
    taints: list | None = None,
    deleting: bool = False,
    **status,
) -> dict:
    meta = {
        "name": name,
        "labels": {
            "kubernetes.io/hostname": name,
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "topology.kubernetes.io/zone": "us-west-2a",
            **(labels or {}),
        },
        "creationTimestamp": "2026-11-30T08:00:00Z",
    }
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T09:00:00Z"
        meta["finalizers"] = ["karpenter.sh/termination"]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": meta,
        "spec": {"taints": taints or []},
        "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"}, **status},
    }


_uid = [0]


def pod(
    name: str,
    ns: str = "default",
    cpu: str = "1",
    memory: str = "1Gi",
    node_name: str | None = None,
    claims: list | None = None,
    created: str = "2026-12-01T10:00:00Z",
    uid: str | None = None,
    owner: str | None = None,
    deleting: bool = False,
    tolerations: list | None = None,
    node_selector: dict | None = None,
    claim_statuses: list | None = None,
) -> dict:
    _uid[0] += 1
    meta: dict = {
        "name": name,
        "namespace": ns,
        "uid": uid or f"0b7c1e2a-0000-4000-8000-{_uid[0]:012d}",
        "creationTimestamp": created,
    }
    if owner:
        meta["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": owner,
                "name": f"{name}-owner",
                "uid": "f" * 8,
                "controller": True,
            }
        ]
    if deleting:
        meta["deletionTimestamp"] = "2026-12-01T09:30:00Z"
    spec: dict = {
        "containers": [
            {
                "name": "main",
                "image": "registry.example.com/app:1.0",
                "resources": {"requests": {"cpu": cpu, "memory": memory}},
            }
        ]
    }
    if node_name:
        spec["nodeName"] = node_name
    if claims:
        spec["resourceClaims"] = claims
    if tolerations:
        spec["tolerations"] = tolerations
    if node_selector:
        spec["nodeSelector"] = node_selector
    doc = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    doc["status"] = {"phase": "Running" if node_name else "Pending"}
    if not node_name:
        # kube-scheduler marked it unschedulable: Karpenter provisions only for such pods.
        doc["status"]["conditions"] = [
            {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}
        ]
    if claim_statuses is not None:
        doc["status"]["resourceClaimStatuses"] = claim_statuses
    return doc


def device_class(name: str = "gpu.nvidia.com", driver: str | None = None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver or name}"'}}]},
    }


def gpu_devices(count: int, model: str = "H100") -> list[dict]:
    return [
        {
            "name": f"gpu-{i}",
            "attributes": {"model": {"string": model}, "index": {"int": i}},
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(count)
    ]


def resource_slice(
    node_name: str | None,
    devices: list[dict],
    driver: str = "gpu.nvidia.com",
    pool: str | None = None,
    name: str | None = None,
    api: str = "resource.k8s.io/v1",
    **spec,
) -> dict:
    pool = pool or node_name
    body = {
        "driver": driver,
        "pool": {"name": pool, "generation": 1, "resourceSliceCount": 1},
        "devices": devices,
        **spec,
    }
    if node_name:
        body["nodeName"] = node_name
    return {
        "apiVersion": api,
        "kind": "ResourceSlice",
        "metadata": {"name": name or f"{pool}-{driver.split('.')[0]}"},
        "spec": body,
    }


def request(name: str = "gpu", cls: str = "gpu.nvidia.com", **exactly) -> dict:
    return {"name": name, "exactly": {"deviceClassName": cls, **exactly}}


def claim(name: str, ns: str = "default", requests: list | None = None, status: dict | None = None):
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name, "namespace": ns, "uid": f"c1a1-{name}"},
        "spec": {"devices": {"requests": requests or [request()]}},
    }
    if status:
        doc["status"] = status
    return doc


def held_device(
    holder: str, node_name: str, device: str, pool: str | None = None, **claim_kw
) -> list[dict]:
    """A running pod ``holder`` on ``node_name`` and its claim ``<holder>-gpu``, allocated
    ``device`` of ``pool`` (the node's own by default) and reserved for the pod."""
    allocated = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "gpu",
                        "driver": "gpu.nvidia.com",
                        "pool": pool or node_name,
                        "device": device,
                    }
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": holder, "uid": f"uid-{holder}"}],
    }
    return [
        claim(f"{holder}-gpu", status=allocated, **claim_kw),
        pod(
            holder,
            node_name=node_name,
            claims=[{"name": "gpu", "resourceClaimName": f"{holder}-gpu"}],
        ),
    ]


def claim_template(name: str, ns: str = "default", requests: list | None = None) -> dict:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"spec": {"devices": {"requests": requests or [request()]}}},
    }


def nodepool(
    name: str,
    weight: int | None = None,
    requirements: list | None = None,
    taints: list | None = None,
    limits: dict | None = None,
) -> dict:
    spec: dict = {
        "template": {
            "spec": {
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "default",
                },
                "requirements": requirements or [],
                "taints": taints or [],
            }
        }
    }
    if weight is not None:
        spec["weight"] = weight
    if limits:
        spec["limits"] = limits
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodePool",
        "metadata": {"name": name},
        "spec": spec,
    }


def instance_type(
    name: str,
    cpu: str = "8",
    memory: str = "32Gi",
    offerings: list | None = None,
    slices: list | None = None,
    family: str | None = None,
    attribute_bindings: list | None = None,
) -> dict:
    reqs = [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]
    if family:
        reqs.append(
            {"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": [family]}
        )
    spec: dict = {
        "capacity": {"cpu": cpu, "memory": memory, "pods": "110"},
        "requirements": reqs,
        "offerings": offerings
        or [{"zone": "us-west-2a", "capacityType": "on-demand", "price": 1.0, "available": True}],
    }
    if slices is not None:
        spec["dynamicResources"] = {
            "resourceSliceTemplates": slices,
            "attributeBindings": attribute_bindings or [],
        }
    return {
        "apiVersion": "dra-web.io/v1alpha1",
        "kind": "InstanceType",
        "metadata": {"name": name},
        "spec": spec,
    }


def template_slice(pool: str, devices: list[dict], driver: str = "gpu.nvidia.com") -> dict:
    return {"driver": driver, "pool": {"name": pool}, "devices": devices, "sharedCounters": []}


def nodeclaim(name: str, pool: str, it: str, node_name: str | None = None, initialized=False):
    status: dict = {"conditions": [{"type": "Launched", "status": "True"}]}
    if node_name:
        status["nodeName"] = node_name
        status["conditions"].append({"type": "Registered", "status": "True"})
    if initialized:
        status["conditions"].append({"type": "Initialized", "status": "True"})
    return {
        "apiVersion": "karpenter.sh/v1",
        "kind": "NodeClaim",
        "metadata": {
            "name": name,
            "labels": {"karpenter.sh/nodepool": pool, "node.kubernetes.io/instance-type": it},
            "creationTimestamp": "2026-12-01T08:55:00Z",
        },
        "spec": {
            "nodeClassRef": {
                "group": "karpenter.k8s.aws",
                "kind": "EC2NodeClass",
                "name": "default",
            },
            "requirements": [
                {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": [it]},
                {"key": "karpenter.sh/nodepool", "operator": "In", "values": [pool]},
            ],
        },
        "status": status,
    }


def gpu_cluster(pods: list[dict], gpus: int = 2, extra: list | None = None) -> list[dict]:
    """A GPU node with `gpus` H100s and a GPU NodePool with one instance type of 4 GPUs."""
    return [
        namespace("default"),
        device_class(),
        node(
            "gpu-node-1",
            cpu="32",
            memory="256Gi",
            labels={"node.kubernetes.io/instance-type": "p5.4xlarge"},
        ),
        resource_slice("gpu-node-1", gpu_devices(gpus)),
        nodepool("gpu-pool"),
        instance_type(
            "p5.8xlarge",
            cpu="32",
            memory="256Gi",
            slices=[template_slice("p5.8xlarge-gpus", gpu_devices(4))],
        ),
        *(extra or []),
        *pods,
    ]


# --- shared results -------------------------------------------------------------------------


@pytest.fixture(scope="session")
def demo_paths(tmp_path_factory):
    trace = tmp_path_factory.mktemp("demo") / "trace.json"
    run = cli("simulate", DEMO, "--json", "--trace", trace)
    assert run.status == 0, run.stderr
    return run, trace


@pytest.fixture(scope="session")
def demo(demo_paths) -> dict:
    return demo_paths[0].doc


@pytest.fixture(scope="session")
def demo_trace(demo_paths):
    return json.loads(demo_paths[1].read_text())


@pytest.fixture(scope="session")
def feature_results() -> dict[str, dict]:
    out = {}
    for path in sorted(EXAMPLES.glob("features-*.yaml")):
        run = cli("simulate", path, "--json")
        assert run.status == 0, (path, run.stderr)
        out[path.stem.removeprefix("features-")] = run.doc
    return out
