"""Loading the storage kinds, DaemonSets, and the pod fields behind volumes, host ports and
provisioning (docs/SNAPSHOT.md): what is read, API defaulting, unknown fields kept, and
problems named by file, document, object and field path."""

from __future__ import annotations

import pytest
import yaml

from allocator.model import ContainerHostPort, CSINodeDriver, PodCondition, PodVolume
from allocator.snapshot import SnapshotError, load_files

SNAPSHOT = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata:
  name: model-cache
  namespace: ml
  annotations: {pv.kubernetes.io/bind-completed: "yes", volume.kubernetes.io/selected-node: ip-10-0-1-7}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: gp3
  volumeName: pvc-8f3c2a10
  resources: {requests: {storage: 500Gi}}
  futureField: kept
status: {phase: Bound, capacity: {storage: 500Gi}}
---
apiVersion: v1
kind: PersistentVolume
metadata: {name: pvc-8f3c2a10}
spec:
  capacity: {storage: 500Gi}
  csi: {driver: ebs.csi.aws.com, volumeHandle: vol-0c1d2e3f4a5b6c7d8, fsType: xfs}
  storageClassName: gp3
  nodeAffinity:
    required:
      nodeSelectorTerms:
      - matchExpressions:
        - {key: topology.kubernetes.io/zone, operator: In, values: [us-west-2b]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: gp3, annotations: {storageclass.kubernetes.io/is-default-class: "true"}}
provisioner: ebs.csi.aws.com
parameters: {type: gp3, throughput: "500"}
volumeBindingMode: WaitForFirstConsumer
allowedTopologies:
- matchLabelExpressions:
  - {key: topology.kubernetes.io/zone, values: [us-west-2a, us-west-2b]}
---
apiVersion: storage.k8s.io/v1
kind: StorageClass
metadata: {name: efs-sc}
provisioner: efs.csi.aws.com
---
apiVersion: storage.k8s.io/v1
kind: CSINode
metadata: {name: ip-10-0-1-7.us-west-2.compute.internal}
spec:
  drivers:
  - name: ebs.csi.aws.com
    nodeID: i-0abc123def4567890
    allocatable: {count: 25}
    topologyKeys: [topology.ebs.csi.aws.com/zone]
  - {name: efs.csi.aws.com, nodeID: i-0abc123def4567890}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: nvidia-dcgm-exporter, namespace: gpu-operator, uid: 7f0c1d2e}
spec:
  selector: {matchLabels: {app: nvidia-dcgm-exporter}}
  template:
    metadata: {labels: {app: nvidia-dcgm-exporter}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: exporter
        image: nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5
        ports: [{name: metrics, containerPort: 9400, hostPort: 9400}]
        resources: {limits: {cpu: 200m, memory: 512Mi}}
---
apiVersion: v1
kind: Pod
metadata: {name: vllm-0, namespace: ml, uid: 3d4e5f60}
spec:
  schedulingGates: [{name: kueue.x-k8s.io/admission}]
  initContainers:
  - {name: fetch-weights, image: busybox, ports: [{containerPort: 9000, hostPort: 9000}]}
  containers:
  - name: vllm
    image: vllm/vllm-openai:v0.6.3
    ports:
    - {containerPort: 8000, hostPort: 8000}
    - {containerPort: 8001, hostPort: 8001, protocol: UDP, hostIP: 10.0.1.17}
    - {containerPort: 9090}
  volumes:
  - name: cache
    persistentVolumeClaim: {claimName: model-cache, readOnly: true}
  - name: scratch
    ephemeral:
      volumeClaimTemplate:
        spec: {storageClassName: gp3, accessModes: [ReadWriteOnce], resources: {requests: {storage: 100Gi}}}
  - name: shm
    emptyDir: {medium: Memory}
status:
  phase: Pending
  nominatedNodeName: ip-10-0-1-7.us-west-2.compute.internal
  conditions:
  - {type: PodScheduled, status: "False", reason: SchedulingGated, message: Scheduling is blocked}
"""


@pytest.fixture(scope="module")
def snapshot():
    return load_files([("cluster.yaml", SNAPSHOT)])


def test_claims_volumes_and_classes_are_read(snapshot):
    claim = snapshot.persistent_volume_claims["ml/model-cache"]
    assert (claim.storage_class_name, claim.volume_name, claim.phase) == (
        "gp3",
        "pvc-8f3c2a10",
        "Bound",
    )
    assert claim.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    assert claim.raw["spec"]["futureField"] == "kept"  # unknown fields survive
    pv = snapshot.persistent_volumes["pvc-8f3c2a10"]
    assert pv.csi_driver == "ebs.csi.aws.com" and not pv.local
    assert pv.node_affinity["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == [
        "us-west-2b"
    ]
    gp3 = snapshot.storage_classes["gp3"]
    assert gp3.volume_binding_mode == "WaitForFirstConsumer"
    assert [[(e.key, e.values) for e in term] for term in gp3.allowed_topologies] == [
        [("topology.kubernetes.io/zone", ("us-west-2a", "us-west-2b"))]
    ]
    # API defaulting: a StorageClass without a binding mode binds immediately.
    assert snapshot.storage_classes["efs-sc"].volume_binding_mode == "Immediate"


def test_csinode_limits_are_per_driver(snapshot):
    node = snapshot.csi_nodes["ip-10-0-1-7.us-west-2.compute.internal"]
    assert node.drivers == [
        CSINodeDriver("ebs.csi.aws.com", 25),
        CSINodeDriver("efs.csi.aws.com", None),
    ]


def test_a_daemonset_is_read_as_the_pod_it_would_run(snapshot):
    ds = snapshot.daemon_sets["gpu-operator/nvidia-dcgm-exporter"]
    pod = ds.template
    assert (pod.namespace, pod.name, ds.uid) == ("gpu-operator", "nvidia-dcgm-exporter", "7f0c1d2e")
    assert pod.host_ports == (ContainerHostPort(9400, "TCP", "", "exporter"),)
    assert {k: str(q) for k, q in pod.requests.items()} == {"cpu": "200m", "memory": "512Mi"}
    assert pod.tolerations[0].key == "nvidia.com/gpu"


def test_pod_volumes_ports_gates_and_status(snapshot):
    (pod,) = snapshot.pods
    assert pod.volumes == [
        PodVolume("cache", "model-cache"),
        PodVolume("scratch", "vllm-0-scratch", ephemeral=True, template_storage_class="gp3"),
    ]
    assert pod.host_ports == (
        ContainerHostPort(8000, "TCP", "", "vllm"),
        ContainerHostPort(8001, "UDP", "10.0.1.17", "vllm"),
    )
    assert pod.init_host_ports == (ContainerHostPort(9000, "TCP", "", "fetch-weights"),)
    assert pod.scheduling_gates == ("kueue.x-k8s.io/admission",)
    assert pod.nominated_node_name == "ip-10-0-1-7.us-west-2.compute.internal"
    assert pod.has_status
    assert pod.conditions == (
        PodCondition("PodScheduled", "False", "SchedulingGated", "Scheduling is blocked"),
    )


def test_kinds_are_counted_and_foreign_groups_skipped(snapshot):
    counts = snapshot.object_counts()
    assert {k: counts[k] for k in ("PersistentVolumeClaim", "StorageClass", "DaemonSet")} == {
        "PersistentVolumeClaim": 1,
        "StorageClass": 2,
        "DaemonSet": 1,
    }
    other = load_files(
        [
            (
                "x.yaml",
                "apiVersion: example.com/v1\nkind: StorageClass\nmetadata: {name: x}\n---\n"
                "apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n",
            )
        ]
    )
    assert other.storage_classes == {}
    assert "unknown kind StorageClass (example.com/v1), skipped" in other.warnings[0]


def problems(text: str) -> list[str]:
    with pytest.raises(SnapshotError) as err:
        load_files([("bad.yaml", text)])
    return err.value.problems


def test_malformed_objects_name_file_document_object_and_field():
    docs = [
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": "gp3"},
            "provisioner": "ebs.csi.aws.com",
            "volumeBindingMode": "OnFirstUse",
            "allowedTopologies": [{"matchLabelExpressions": [{"key": "zone", "values": []}]}],
        },
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSINode",
            "metadata": {"name": "ip-10-0-1-7"},
            "spec": {"drivers": [{"name": "ebs.csi.aws.com", "allocatable": {"count": "25"}}]},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": "cache", "namespace": "ml"},
            "spec": {"volumeName": 7},
            "status": {"phase": "Ready"},
        },
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": "pv-1"},
            "spec": {"csi": {"volumeHandle": "vol-1"}},
        },
        {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": {"name": "exporter", "namespace": "monitoring"},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            {"name": "e", "ports": [{"containerPort": 9400, "protocol": "HTTP"}]}
                        ]
                    }
                }
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "vllm-0", "namespace": "ml"},
            "spec": {
                "schedulingGates": [{}],
                "containers": [{"name": "vllm", "ports": [{"hostPort": 70000}]}],
                "volumes": [{"name": "cache", "persistentVolumeClaim": {}}],
            },
        },
    ]
    assert problems(yaml.safe_dump_all(docs)) == [
        "bad.yaml doc 1 StorageClass gp3: volumeBindingMode: must be one of Immediate, "
        "WaitForFirstConsumer",
        "bad.yaml doc 1 StorageClass gp3: allowedTopologies[0].matchLabelExpressions[0].values: "
        "must not be empty",
        "bad.yaml doc 2 CSINode ip-10-0-1-7: spec.drivers[0].allocatable.count: must be an "
        "integer >= 0",
        "bad.yaml doc 3 PersistentVolumeClaim ml/cache: status.phase: must be one of Pending, "
        "Bound, Lost",
        "bad.yaml doc 3 PersistentVolumeClaim ml/cache: spec.volumeName: must be a string, not a "
        "number",
        "bad.yaml doc 4 PersistentVolume pv-1: spec.csi.driver: required",
        "bad.yaml doc 5 DaemonSet monitoring/exporter: "
        "spec.template.spec.containers[0].ports[0].protocol: must be one of TCP, UDP, SCTP",
        "bad.yaml doc 6 Pod ml/vllm-0: spec.volumes[0].persistentVolumeClaim.claimName: required",
        "bad.yaml doc 6 Pod ml/vllm-0: spec.containers[0].ports[0].containerPort: required",
        "bad.yaml doc 6 Pod ml/vllm-0: spec.containers[0].ports[0].hostPort: must be between 0 "
        "and 65535",
        "bad.yaml doc 6 Pod ml/vllm-0: spec.schedulingGates[0].name: required",
    ]


def test_what_is_simulated_raises_no_not_simulated_warning(snapshot):
    # Scheduling gates, nominatedNodeName, volumes, host ports and the storage kinds and
    # DaemonSets are simulated now: the snapshot using them all warns of nothing.
    assert snapshot.warnings == [] and snapshot.unsimulated == []
