"""A pod's volumes as Karpenter's provisioner reads them.

Three questions, each answered as Karpenter's code answers it:

* ``validate_claims`` (``VolumeTopology.ValidatePersistentVolumeClaims``, called from the
  provisioner's ``Validate``): is every PersistentVolumeClaim of the pod usable? A pending pod
  with a missing claim, a claim bound to a missing or deleting volume, an unbound claim without a
  StorageClass, with a missing StorageClass or with an ``Immediate`` one is not provisioned for
  at all: Karpenter ignores it.
* ``volume_topology`` (``VolumeTopology.GetRequirements``): the node requirements the volumes
  add, as *alternatives*: each ORed term of a bound volume's ``nodeAffinity`` and each
  ``allowedTopologies`` term of an unbound claim's StorageClass is one alternative; several
  volumes give the cross product, keeping the combinations that can hold together (all of them
  when none can). A target takes the pod when one alternative fits there. The provisioner drops
  a pod whose lookup fails (``getVolumeTopologyRequirements``); for pending pods ``Validate``
  has already refused those, so it matters for pods moved off deleting nodes.
* ``VolumeUsage`` (``pkg/scheduling/volumeusage.go``): per-driver attach limits of an existing
  node (its CSINode's ``allocatable.count``), counted in distinct claims.

Messages keep Karpenter's words and then name the objects involved.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import field

from allocator.model import (
    CSINode,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodVolume,
    Snapshot,
    StorageClass,
)
from allocator.records import record
from allocator.requirements import LABEL_HOSTNAME, Requirement, Requirements

BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
IMMEDIATE = "Immediate"
EBS_CSI_DRIVER = "ebs.csi.aws.com"

# In-tree provisioner names and the CSI drivers they migrated to (k8s.io/csi-translation-lib).
IN_TREE_TO_CSI: dict[str, str] = {
    "kubernetes.io/aws-ebs": EBS_CSI_DRIVER,
    "kubernetes.io/gce-pd": "pd.csi.storage.gke.io",
    "kubernetes.io/azure-disk": "disk.csi.azure.com",
    "kubernetes.io/azure-file": "file.csi.azure.com",
    "kubernetes.io/cinder": "cinder.csi.openstack.org",
    "kubernetes.io/vsphere-volume": "csi.vsphere.vmware.com",
    "kubernetes.io/portworx-volume": "pxd.portworx.com",
}

# Why a claim refuses a pod (VolumeProblem.code).
CLAIM_NOT_FOUND = "claim-not-found"
CLAIM_DELETING = "claim-deleting"
CLAIM_LOST = "claim-lost"
VOLUME_NOT_FOUND = "volume-not-found"
VOLUME_DELETING = "volume-deleting"
CLAIM_NOT_BOUND = "claim-bind-incomplete"
NO_STORAGE_CLASS = "no-storage-class"
STORAGE_CLASS_NOT_FOUND = "storage-class-not-found"
IMMEDIATE_UNBOUND = "immediate-unbound"


@record(frozen=True)
class Storage:
    """The snapshot's storage objects, looked up by key."""

    claims: Mapping[str, PersistentVolumeClaim] = field(default_factory=dict)  # "ns/name"
    volumes: Mapping[str, PersistentVolume] = field(default_factory=dict)
    classes: Mapping[str, StorageClass] = field(default_factory=dict)

    @classmethod
    def of(cls, snapshot: Snapshot) -> Storage:
        """The snapshot's objects, a claim written without ``storageClassName`` given the
        default StorageClass as the API server's admission gives it one."""
        default = default_storage_class(snapshot.storage_classes.values())
        claims = snapshot.persistent_volume_claims
        if default is not None and any(c.storage_class_name is None for c in claims.values()):
            claims = {
                key: c
                if c.storage_class_name is not None
                else dataclasses.replace(c, storage_class_name=default.name)
                for key, c in claims.items()
            }
        return cls(claims, snapshot.persistent_volumes, snapshot.storage_classes)

    def claim_of(self, pod: Pod, volume: PodVolume) -> PersistentVolumeClaim | None:
        return self.claims.get(f"{pod.namespace}/{volume.claim_name}")


@record(frozen=True)
class VolumeProblem:
    """Why Karpenter will not provision for a pod because of one of its volumes."""

    code: str
    message: str  # Karpenter's words, then the objects involved
    claim: str  # "namespace/name" of the claim
    volume: str  # the pod's volume name

    def __str__(self) -> str:
        return self.message


def default_storage_class(classes: Iterable[StorageClass]) -> StorageClass | None:
    """The default StorageClass: of several, the newest, then the first by name (the API
    server's DefaultStorageClass admission)."""
    defaults = [c for c in classes if c.default]
    if not defaults:
        return None
    newest = max(c.creation_timestamp for c in defaults)
    return min((c for c in defaults if c.creation_timestamp == newest), key=lambda c: c.name)


def _not_found(resource: str, name: str) -> str:
    # The API server's NotFound text, as Karpenter's errors carry it.
    return f'{resource} "{name}" not found'


def _claim_not_found(pod: Pod, volume: PodVolume, prefix: str = "") -> VolumeProblem:
    key = f"{pod.namespace}/{volume.claim_name}"
    detail = f"volume {volume.name}"
    if volume.ephemeral:
        detail += ", ephemeral: the ephemeral volume controller has not created its claim"
    message = (
        f"{prefix}getting persistent volume claim, "
        f"{_not_found('persistentvolumeclaims', volume.claim_name)} ({detail})"
    )
    return VolumeProblem(CLAIM_NOT_FOUND, message, key, volume.name)


def validate_claims(pod: Pod, storage: Storage) -> VolumeProblem | None:
    """Karpenter's ValidatePersistentVolumeClaims: the first volume that makes the pod one
    Karpenter ignores, else None."""
    for volume in pod.volumes:
        claim = storage.claim_of(pod, volume)
        if claim is None:
            return _claim_not_found(pod, volume)
        problem = _validate_claim(claim, volume, storage)
        if problem is not None:
            return problem
    return None


def _validate_claim(
    claim: PersistentVolumeClaim, volume: PodVolume, storage: Storage
) -> VolumeProblem | None:
    key = claim.key
    names = f"PersistentVolumeClaim {key}"

    def problem(code: str, message: str) -> VolumeProblem:
        return VolumeProblem(code, message, key, volume.name)

    # The cases kube-scheduler's volume binding rejects as well.
    if claim.deleting:
        return problem(CLAIM_DELETING, f"persistentvolumeclaim is being deleted ({names})")
    if claim.phase == "Lost":
        return problem(
            CLAIM_LOST,
            "persistentvolumeclaim bound to non-existent persistentvolume "
            f"({names}, PersistentVolume {claim.volume_name or '-'})",
        )
    if claim.volume_name:
        names = f"{names}, PersistentVolume {claim.volume_name}"
        pv = storage.volumes.get(claim.volume_name)
        if pv is None:
            return problem(
                VOLUME_NOT_FOUND,
                "failed to validate pvc, "
                f"{_not_found('persistentvolumes', claim.volume_name)} ({names})",
            )
        if pv.deleting:
            return problem(
                VOLUME_DELETING,
                f"failed to validate pvc, persistentvolume is being deleted ({names})",
            )
        # kube-scheduler treats a claim naming a volume as bound only once the binding
        # controller has marked it so.
        if BIND_COMPLETED not in claim.annotations:
            return problem(
                CLAIM_NOT_BOUND,
                "pvc is considered unbound because it does not contain annotation "
                f"{BIND_COMPLETED} ({names})",
            )
        return None
    class_name = claim.storage_class_name or ""
    if not class_name:
        return problem(NO_STORAGE_CLASS, f"unbound pvc must define a storage class ({names})")
    names = f"{names}, StorageClass {class_name}"
    storage_class = storage.classes.get(class_name)
    if storage_class is None:
        return problem(
            STORAGE_CLASS_NOT_FOUND,
            "failed to validate pvc, failed to get storage class, "
            f"{_not_found('storageclasses.storage.k8s.io', class_name)} ({names})",
        )
    if storage_class.volume_binding_mode == IMMEDIATE:
        return problem(
            IMMEDIATE_UNBOUND,
            "failed to validate pvc, pvc with immediate volume binding mode must be bound "
            f"({names})",
        )
    return None


# --- topology ----------------------------------------------------------------------------------


@record(frozen=True)
class VolumeTopologySource:
    """The object that pins a pod's volume: a bound PersistentVolume's node affinity, or the
    StorageClass of an unbound claim."""

    kind: str  # "PersistentVolume" | "StorageClass"
    name: str
    claim: str  # "namespace/name"

    def __str__(self) -> str:
        return f"{self.kind} {self.name} of PersistentVolumeClaim {self.claim}"


@record(frozen=True)
class VolumeAlternative:
    """One combination of the volumes' topology terms: requirements a target must meet, and
    the objects each term came from."""

    requirements: Requirements
    sources: tuple[VolumeTopologySource, ...]

    def describe(self) -> str:
        """``PersistentVolume pv-1 of PersistentVolumeClaim ml/cache: zone In [us-west-2b]``."""
        if not self.sources:
            return "no volume requirement"
        shown = str(self.requirements) or "any node"
        return f"{'; '.join(str(s) for s in self.sources)}: {shown}"


@record(frozen=True)
class VolumeTopology:
    """A pod's volume requirement alternatives; none when its volumes constrain nothing."""

    alternatives: tuple[VolumeAlternative, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.alternatives)


NO_VOLUME_TOPOLOGY = VolumeTopology()


def volume_topology(pod: Pod, storage: Storage) -> VolumeTopology | VolumeProblem:
    """Karpenter's GetRequirements: the pod's volume requirement alternatives, or why they
    cannot be read (the provisioner then leaves the pod out of the run)."""
    # None stands for Go's nil alternative: no requirement yet.
    merged: list[_Partial] = [(None, ())]
    for volume in pod.volumes:
        found = _volume_alternatives(pod, volume, storage)
        if isinstance(found, VolumeProblem):
            return found
        if found:
            merged = _merge(merged, found)
    if len(merged) == 1 and merged[0][0] is None:
        return NO_VOLUME_TOPOLOGY
    return VolumeTopology(
        tuple(VolumeAlternative(reqs or Requirements(), sources) for reqs, sources in merged)
    )


# A partial alternative while merging: its requirements (None: Go's nil, no requirement yet)
# and the objects its terms came from.
_Partial = tuple[Requirements | None, tuple[VolumeTopologySource, ...]]


def _merge(merged: list[_Partial], alternatives: list[_Partial]) -> list[_Partial]:
    """The cross product, keeping the combinations whose requirements intersect; all of them
    when none does (the pod then fails where it is tried, as in Karpenter)."""
    compatible = [
        _combine(existing, alt)
        for existing in merged
        for alt in alternatives
        if existing[0] is None or existing[0].intersects(alt[0]) is None
    ]
    if compatible:
        return compatible
    return [_combine(existing, alt) for existing in merged for alt in alternatives]


def _combine(existing: _Partial, alt: _Partial) -> _Partial:
    reqs = Requirements()
    if existing[0] is not None:
        reqs.add(existing[0])
    reqs.add(alt[0])
    return reqs, existing[1] + alt[1]


def _volume_alternatives(
    pod: Pod, volume: PodVolume, storage: Storage
) -> list[_Partial] | VolumeProblem:
    claim = storage.claim_of(pod, volume)
    if claim is None:
        return _claim_not_found(pod, volume, prefix="discovering persistent volume claim, ")
    if claim.volume_name:
        pv = storage.volumes.get(claim.volume_name)
        if pv is None:
            return VolumeProblem(
                VOLUME_NOT_FOUND,
                "getting existing requirements, getting persistent volume, "
                f"{_not_found('persistentvolumes', claim.volume_name)} "
                f"(PersistentVolumeClaim {claim.key})",
                claim.key,
                volume.name,
            )
        source = VolumeTopologySource("PersistentVolume", pv.name, claim.key)
        return [(reqs, (source,)) for reqs in persistent_volume_terms(pv)]
    class_name = claim.storage_class_name or ""
    if not class_name:
        return []
    storage_class = storage.classes.get(class_name)
    if storage_class is None:
        return VolumeProblem(
            STORAGE_CLASS_NOT_FOUND,
            "getting storage class, "
            f"{_not_found('storageclasses.storage.k8s.io', class_name)} "
            f"(PersistentVolumeClaim {claim.key})",
            claim.key,
            volume.name,
        )
    source = VolumeTopologySource("StorageClass", storage_class.name, claim.key)
    return [(reqs, (source,)) for reqs in storage_class_terms(storage_class)]


def persistent_volume_terms(pv: PersistentVolume) -> list[Requirements]:
    """One Requirements per ORed term of the volume's required node affinity. A local or
    hostPath volume's hostname terms are dropped (the pod is being placed anew), a term left
    with nothing becomes an alternative that allows any node."""
    out: list[Requirements] = []
    for term in (pv.node_affinity or {}).get("nodeSelectorTerms") or ():
        expressions = list(term.get("matchExpressions") or ())
        kept = expressions
        if pv.local:
            kept = [e for e in expressions if e.get("key") != LABEL_HOSTNAME]
            if expressions and not kept:
                out.append(Requirements())
                continue
        if kept:
            out.append(Requirements.from_node_selector_requirements(kept))
    return out


def storage_class_terms(storage_class: StorageClass) -> list[Requirements]:
    """One Requirements per ``allowedTopologies`` term, each expression an ``In``."""
    out: list[Requirements] = []
    for term in storage_class.allowed_topologies:
        if term:
            out.append(Requirements(Requirement.new(e.key, "In", e.values) for e in term))
    return out


# --- attach limits -----------------------------------------------------------------------------

# CSI driver -> the claims ("namespace/name") it attaches, as (driver, claims) pairs by driver.
Volumes = tuple[tuple[str, frozenset[str]], ...]


def volume_driver(claim: PersistentVolumeClaim, storage: Storage) -> str:
    """Karpenter's ResolveDriver: the bound volume's CSI driver (in-tree EBS as its CSI
    driver), else the StorageClass's provisioner (in-tree names translated); "" when neither
    says (the claim then counts against no limit)."""
    if claim.volume_name:
        pv = storage.volumes.get(claim.volume_name)
        if pv is None:
            return ""
        if pv.csi_driver:
            return pv.csi_driver
        return EBS_CSI_DRIVER if pv.aws_elastic_block_store else ""
    storage_class = storage.classes.get(claim.storage_class_name or "")
    if storage_class is None:
        return ""
    return IN_TREE_TO_CSI.get(storage_class.provisioner, storage_class.provisioner)


def pod_volumes(pod: Pod, storage: Storage) -> Volumes:
    """Karpenter's GetVolumes: the claims the pod would attach, by driver (a missing claim is
    skipped: it counts against nothing)."""
    out: dict[str, set[str]] = {}
    for volume in pod.volumes:
        claim = storage.claim_of(pod, volume)
        if claim is None:
            continue
        driver = volume_driver(claim, storage)
        if driver:
            out.setdefault(driver, set()).add(claim.key)
    return tuple((driver, frozenset(claims)) for driver, claims in sorted(out.items()))


def csi_limits(csi_node: CSINode | None) -> dict[str, int]:
    """Per-driver attach limits a CSINode states (drivers without ``allocatable`` have none)."""
    if csi_node is None:
        return {}
    return {
        d.name: d.allocatable_count for d in csi_node.drivers if d.allocatable_count is not None
    }


@record(frozen=True)
class VolumeLimitExceeded:
    """A CSI driver's attach limit that the pod's volumes would pass."""

    driver: str
    count: int  # distinct claims of the driver with the pod added
    limit: int

    def __str__(self) -> str:
        # Karpenter's words (the caller puts "checking volume usage, " before them).
        return (
            f"would exceed volume limit (provisioner {self.driver}: {self.count} volumes, "
            f"limit {self.limit})"
        )


class VolumeUsage:
    """The claims attached on one node, by pod, against its drivers' limits.
    ``exceeds_limits`` decides and changes nothing; ``add`` commits."""

    __slots__ = ("limits", "_by_pod")

    def __init__(
        self, limits: Mapping[str, int] | None = None, by_pod: Mapping[str, Volumes] | None = None
    ) -> None:
        self.limits: dict[str, int] = dict(limits or {})
        self._by_pod: dict[str, Volumes] = dict(by_pod or {})

    def attached(self) -> dict[str, frozenset[str]]:
        """Driver -> the distinct claims attached (a claim shared by pods counts once)."""
        out: dict[str, set[str]] = {}
        for volumes in self._by_pod.values():
            for driver, claims in volumes:
                out.setdefault(driver, set()).update(claims)
        return {driver: frozenset(claims) for driver, claims in out.items()}

    def exceeds_limits(self, volumes: Volumes) -> VolumeLimitExceeded | None:
        """The first driver (by name) over its limit once the pod's volumes are attached, else
        None. A node already over a limit refuses every pod, as Karpenter's check counts
        every driver attached."""
        if not self.limits:
            return None
        attached = self.attached()
        wanted = dict(volumes)
        for driver in sorted(attached.keys() | wanted.keys()):
            limit = self.limits.get(driver)
            if limit is None:
                continue
            count = len(attached.get(driver, frozenset()) | wanted.get(driver, frozenset()))
            if count > limit:
                return VolumeLimitExceeded(driver, count, limit)
        return None

    def add(self, pod: Pod, volumes: Volumes) -> None:
        self._by_pod[pod.key] = tuple(volumes)

    def delete_pod(self, pod_key: str) -> None:
        self._by_pod.pop(pod_key, None)

    def copy(self) -> VolumeUsage:
        return VolumeUsage(self.limits, self._by_pod)


def usage_of(csi_node: CSINode | None, pods: Iterable[Pod], storage: Storage) -> VolumeUsage:
    """The usage of a node running ``pods`` under its CSINode's limits."""
    usage = VolumeUsage(csi_limits(csi_node))
    for pod in pods:
        volumes = pod_volumes(pod, storage)
        if volumes:
            usage.add(pod, volumes)
    return usage


# --- what the scheduler reads per pod ------------------------------------------------------------


@record
class RunVolumes:
    """The volumes of one run's pods as the scheduler reads them: a pod's topology
    alternatives (worked out once, when the pending pods were sorted out: Karpenter's
    ``volumeReqsByPod``) and the claims it would attach by driver (Karpenter's GetVolumes)."""

    storage: Storage = field(default_factory=Storage)
    topology: Mapping[str, VolumeTopology] = field(default_factory=dict)  # pod key -> ...
    _volumes: dict[str, Volumes] = field(default_factory=dict)

    def alternatives(self, pod: Pod) -> tuple[VolumeAlternative, ...]:
        found = self.topology.get(pod.key)
        return found.alternatives if found is not None else ()

    def volumes(self, pod: Pod) -> Volumes:
        found = self._volumes.get(pod.key)
        if found is None:
            found = self._volumes[pod.key] = pod_volumes(pod, self.storage) if pod.volumes else ()
        return found
