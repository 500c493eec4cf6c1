"""Storage kinds: PersistentVolumeClaim and PersistentVolume (core/v1), StorageClass and
CSINode (storage.k8s.io/v1), read as far as Karpenter's volume topology and volume limits
read them. API defaulting applies where the API server would have applied it (a StorageClass
without ``volumeBindingMode`` is ``Immediate``).
"""

from __future__ import annotations

from allocator.model import (
    CSINode,
    CSINodeDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    StorageClass,
    TopologySelectorRequirement,
)
from allocator.snapshot.fields import Context

BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
CLAIM_PHASES = ("Pending", "Bound", "Lost")
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"


def _metadata(obj: dict) -> dict:
    md = obj.get("metadata")
    return md if isinstance(md, dict) else {}


def _annotations(md: dict) -> dict[str, str]:
    # Their shape is checked with the rest of the metadata.
    raw = md.get("annotations")
    if not isinstance(raw, dict):
        return {}
    return {str(k): v for k, v in raw.items() if isinstance(v, str)}


def build_persistent_volume_claim(ctx: Context, obj: dict) -> PersistentVolumeClaim:
    md = _metadata(obj)
    spec = ctx.map(obj, "spec", "spec", required=True)
    status = ctx.map(obj, "status", "status")
    phase = ctx.str(status, "phase", "status.phase")
    if phase is not None and phase not in CLAIM_PHASES:
        ctx.problem("status.phase", f"must be one of {', '.join(CLAIM_PHASES)}")
    return PersistentVolumeClaim(
        namespace=ctx.namespace or "default",
        name=ctx.name or "",
        storage_class_name=ctx.str(spec, "storageClassName", "spec.storageClassName"),
        volume_name=ctx.str(spec, "volumeName", "spec.volumeName") or "",
        phase=phase,
        annotations=_annotations(md),
        deleting=md.get("deletionTimestamp") is not None,
        raw=obj,
    )


def build_persistent_volume(ctx: Context, obj: dict) -> PersistentVolume:
    md = _metadata(obj)
    spec = ctx.map(obj, "spec", "spec", required=True)
    affinity = ctx.map(spec, "nodeAffinity", "spec.nodeAffinity")
    csi = ctx.map(spec, "csi", "spec.csi")
    driver = ctx.str(csi, "driver", "spec.csi.driver", required=True) if csi else None
    return PersistentVolume(
        name=ctx.name or "",
        node_affinity=ctx.node_selector(affinity, "required", "spec.nodeAffinity.required"),
        csi_driver=driver,
        aws_elastic_block_store=bool(
            ctx.map(spec, "awsElasticBlockStore", "spec.awsElasticBlockStore")
        ),
        local=bool(
            ctx.map(spec, "local", "spec.local") or ctx.map(spec, "hostPath", "spec.hostPath")
        ),
        storage_class_name=ctx.str(spec, "storageClassName", "spec.storageClassName") or "",
        deleting=md.get("deletionTimestamp") is not None,
        raw=obj,
    )


def build_storage_class(ctx: Context, obj: dict) -> StorageClass:
    mode = ctx.str(obj, "volumeBindingMode", "volumeBindingMode") or "Immediate"
    if mode not in BINDING_MODES:
        ctx.problem("volumeBindingMode", f"must be one of {', '.join(BINDING_MODES)}")
    terms = []
    for p, term in ctx.items(obj, "allowedTopologies", "allowedTopologies"):
        expressions = []
        for ep, e in ctx.items(term, "matchLabelExpressions", f"{p}.matchLabelExpressions"):
            key = ctx.str(e, "key", f"{ep}.key", required=True)
            values = ctx.strings(e, "values", f"{ep}.values")
            if not values:
                ctx.problem(f"{ep}.values", "must not be empty")
            if key and values:
                expressions.append(TopologySelectorRequirement(key, values))
        terms.append(tuple(expressions))
    md = _metadata(obj)
    created = md.get("creationTimestamp")
    return StorageClass(
        name=ctx.name or "",
        provisioner=ctx.str(obj, "provisioner", "provisioner", required=True) or "",
        volume_binding_mode=mode,
        allowed_topologies=terms,
        default=_annotations(md).get(DEFAULT_CLASS_ANNOTATION) == "true",
        creation_timestamp=created if isinstance(created, str) else "",
        raw=obj,
    )


def build_csi_node(ctx: Context, obj: dict) -> CSINode:
    spec = ctx.map(obj, "spec", "spec", required=True)
    drivers = []
    for p, d in ctx.items(spec, "drivers", "spec.drivers"):
        name = ctx.str(d, "name", f"{p}.name", required=True)
        ctx.str(d, "nodeID", f"{p}.nodeID")
        ctx.strings(d, "topologyKeys", f"{p}.topologyKeys")
        count = None
        if d.get("allocatable") is not None:
            allocatable = ctx.map(d, "allocatable", f"{p}.allocatable")
            count = ctx.int(allocatable, "count", f"{p}.allocatable.count", 0, minimum=0) or 0
        if name:
            drivers.append(CSINodeDriver(name, count))
    return CSINode(name=ctx.name or "", drivers=drivers, raw=obj)
