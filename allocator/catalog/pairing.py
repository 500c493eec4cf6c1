"""Which catalog instance types a cluster needs: the live import and ``kubectl dra why`` add
them to what they read from the cluster, since no API lists the cloud's instance types.

Rules, in the order they apply:

* only a cluster with Karpenter NodePools on AWS (``nodeClassRef.group: karpenter.k8s.aws``)
  gets the AWS catalog: without a NodePool nothing new is launched, and another provider's
  NodePool would not launch EC2 instances;
* the region is the one asked for, else the nodes' ``topology.kubernetes.io/region`` label,
  else their zone label without its letter, else the region or zones a NodePool requires;
* the instance types are those an AWS NodePool's requirements allow (Karpenter's
  ``Intersects``, as its instance type filter does), plus every size of the families of the
  nodes and NodeClaims the cluster already has (a NodeClaim not yet registered takes its
  capacity from its instance type);
* MIG partitions are published when the cluster's own GPU nodes publish them (a
  ``gpu.nvidia.com`` ResourceSlice with a ``type: mig`` device or shared counters), full GPUs
  otherwise, unless asked.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import field

from allocator.catalog import aws, nvidia
from allocator.records import record
from allocator.requirements import RequirementError, Requirements

AWS_NODE_CLASS_GROUP = "karpenter.k8s.aws"
ZONE_LABEL = "topology.kubernetes.io/zone"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
_ZONE_SUFFIX = re.compile(r"^([a-z]{2}(?:-gov)?-[a-z]+-\d+)[a-z]$")


@record
class Pairing:
    """The catalog documents to add (empty when none apply) and what was decided, in words."""

    region: str | None = None
    mig: bool = False
    instance_types: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def _kind(items: Iterable[dict], kind: str) -> list[dict]:
    return [d for d in items if isinstance(d, dict) and d.get("kind") == kind]


def _labels(doc: dict) -> dict[str, str]:
    labels = (doc.get("metadata") or {}).get("labels") or {}
    return labels if isinstance(labels, dict) else {}


def _template_spec(pool: dict) -> dict:
    spec = ((pool.get("spec") or {}).get("template") or {}).get("spec") or {}
    return spec if isinstance(spec, dict) else {}


def _is_aws(pool: dict) -> bool:
    ref = _template_spec(pool).get("nodeClassRef") or {}
    return isinstance(ref, dict) and ref.get("group", AWS_NODE_CLASS_GROUP) == AWS_NODE_CLASS_GROUP


def region_of_zone(zone: str) -> str | None:
    match = _ZONE_SUFFIX.match(zone)
    return match.group(1) if match else None


def _requirement_values(pool: dict, key: str) -> list[str]:
    values: list[str] = []
    for req in _template_spec(pool).get("requirements") or []:
        if isinstance(req, dict) and req.get("key") == key and req.get("operator") == "In":
            values += [v for v in req.get("values") or [] if isinstance(v, str)]
    return values


def find_region(nodes: list[dict], pools: list[dict]) -> str | None:
    """The region the cluster runs in, from its nodes' (or NodeClaims') labels, else from its
    NodePools' requirements; the most common one when they differ."""
    seen: dict[str, int] = {}
    for node in nodes:
        labels = _labels(node)
        region = labels.get(aws.REGION_LABEL) or region_of_zone(labels.get(ZONE_LABEL, ""))
        if region:
            seen[region] = seen.get(region, 0) + 1
    for pool in pools:
        for region in _requirement_values(pool, aws.REGION_LABEL):
            seen.setdefault(region, 0)
        for zone in _requirement_values(pool, ZONE_LABEL):
            region = region_of_zone(zone)
            if region:
                seen.setdefault(region, 0)
    if not seen:
        return None
    return max(sorted(seen), key=lambda r: seen[r])


def cluster_publishes_mig(slices: list[dict]) -> bool:
    for rs in slices:
        spec = rs.get("spec") or {}
        if spec.get("driver") != nvidia.DRIVER:
            continue
        if spec.get("sharedCounters"):
            return True
        for device in spec.get("devices") or []:
            attrs = (device.get("basic") or device).get("attributes") or {}
            if (attrs.get("type") or {}).get("string") == "mig":
                return True
    return False


def _pool_requirements(pool: dict) -> Requirements | None:
    reqs = [
        {k: v for k, v in r.items() if k in ("key", "operator", "values")}
        for r in _template_spec(pool).get("requirements") or []
        if isinstance(r, dict)
    ]
    try:
        return Requirements.from_node_selector_requirements(reqs)
    except (RequirementError, TypeError, ValueError):
        return None  # the snapshot loader reports a malformed NodePool; nothing to add here


def allowed_names(pools: list[dict], documents: list[dict]) -> set[str]:
    """The catalog instance types some NodePool may launch."""
    names: set[str] = set()
    pool_reqs = [r for r in (_pool_requirements(p) for p in pools) if r is not None]
    for doc in documents:
        it_reqs = Requirements.from_node_selector_requirements(doc["spec"]["requirements"])
        if any(reqs.intersects(it_reqs) is None for reqs in pool_reqs):
            names.add(doc["metadata"]["name"])
    return names


def pair_with_cluster(
    items: Iterable[dict], *, region: str | None = None, mig: bool | None = None
) -> Pairing:
    """The catalog InstanceTypes for a cluster listing (raw objects with their ``kind``)."""
    items = list(items)
    pools = _kind(items, "NodePool")
    nodes = _kind(items, "Node")
    claims = _kind(items, "NodeClaim")
    pairing = Pairing()
    if not pools:
        pairing.notes.append("no Karpenter NodePool: no catalog instance types added")
        return pairing
    aws_pools = [p for p in pools if _is_aws(p)]
    if not aws_pools:
        pairing.notes.append(
            "no NodePool uses an AWS EC2NodeClass (nodeClassRef.group karpenter.k8s.aws): the "
            "AWS catalog does not apply"
        )
        return pairing
    pairing.region = region or find_region(nodes + claims, aws_pools)
    if pairing.region is None:
        pairing.notes.append(
            "the cluster's region is unknown (no node has a region or zone label and no "
            "NodePool requires one): no catalog instance types added; name the region"
        )
        return pairing
    if pairing.region not in aws.regions():
        pairing.notes.append(
            f"region {pairing.region} is not in the AWS catalog ({', '.join(aws.regions())}): "
            "no catalog instance types added"
        )
        return pairing
    pairing.mig = cluster_publishes_mig(_kind(items, "ResourceSlice")) if mig is None else mig
    options = aws.CatalogOptions(mig=pairing.mig)
    every = aws.instance_types(pairing.region, None, options)
    names = allowed_names(aws_pools, every)
    seen_types = {_labels(d).get(INSTANCE_TYPE_LABEL) for d in nodes + claims} - {None}
    seen_families = {aws.family_of(t) for t in seen_types}
    names |= {
        d["metadata"]["name"]
        for d in every
        if aws.family_of(d["metadata"]["name"]) in seen_families
    }
    pairing.instance_types = [d for d in every if d["metadata"]["name"] in names]
    if pairing.instance_types:
        families = sorted({aws.family_of(n) for n in names}, key=aws.families().index)
        pairing.notes.append(
            f"{len(pairing.instance_types)} instance types from the dra-web AWS catalog for "
            f"{pairing.region} ({', '.join(families)}; "
            f"{'MIG partitions' if pairing.mig else 'full GPUs'}): figures from Karpenter's AWS "
            "provider, prices its static on-demand list, device uuids and driver versions "
            "placeholders"
        )
    else:
        pairing.notes.append(
            f"no AWS NodePool allows an instance type of the catalog ({', '.join(aws.families())}) "
            "and no node runs one: no catalog instance types added"
        )
    return pairing
