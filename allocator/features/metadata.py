"""DRA device metadata in containers (KEP-5304's protocol), as a preview per allocated claim.

For each claim, request and driver a JSON stream of DeviceMetadata objects appears read-only
inside the containers that use the claim, under
``/var/run/kubernetes.io/dra-device-attributes``:

- a claim named directly: ``resourceclaims/<claimName>/<requestName>/<driver>-metadata.json``;
- a claim from a template: ``resourceclaimtemplates/<podClaimName>/<requestName>/<driver>-
  metadata.json``, where podClaimName is the pod's ``spec.resourceClaims[].name``.

With a prioritized list only the top-level request names the directory; the document's
``requests[].name`` is the full ``<request>/<subrequest>``. The first file has
``metadata.generation: 1``. Attributes are the ones the device publishes, capacities are not.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable
from typing import Any

from allocator.features.attributes import encode_attribute
from allocator.features.prioritized import top_level_request
from allocator.model import Device, DeviceID, DeviceRequestAllocationResult, ResourceClaim

ROOT = "/var/run/kubernetes.io/dra-device-attributes"
API_VERSION = "metadata.resource.k8s.io/v1beta1"
KIND = "DeviceMetadata"
_UID_NAMESPACE = uuid.UUID("0b5c6f0e-7a43-4c1e-8d0a-2f6e9b1d4c37")


def metadata_path(
    claim_name: str, request: str, driver: str, pod_claim_name: str | None = None
) -> str:
    top = top_level_request(request)
    if pod_claim_name:
        return f"{ROOT}/resourceclaimtemplates/{pod_claim_name}/{top}/{driver}-metadata.json"
    return f"{ROOT}/resourceclaims/{claim_name}/{top}/{driver}-metadata.json"


def claim_uid(claim: ResourceClaim) -> str:
    uid = ((claim.raw or {}).get("metadata") or {}).get("uid")
    if uid:
        return str(uid)
    # Claims the simulator generated have no UID yet: derive a stable one.
    return str(uuid.uuid5(_UID_NAMESPACE, claim.key))


def device_metadata(
    claim: ResourceClaim,
    results: Iterable[DeviceRequestAllocationResult],
    device_lookup: Callable[[DeviceID], Device | None],
    pod_claim_name: str | None = None,
) -> list[dict[str, Any]]:
    """One ``{"path", "document"}`` per (top-level request, driver) of the claim's results.

    ``pod_claim_name`` is set for claims generated from a ResourceClaimTemplate."""
    files: dict[tuple[str, str], dict[str, list[dict]]] = {}
    for result in results:
        device = device_lookup(result.device_id)
        entry: dict[str, Any] = {
            "driver": result.driver,
            "pool": result.pool,
            "name": result.device,
        }
        if device is not None and device.attributes:
            entry["attributes"] = {
                name: encode_attribute(value) for name, value in sorted(device.attributes.items())
            }
        key = (top_level_request(result.request), result.driver)
        files.setdefault(key, {}).setdefault(result.request, []).append(entry)
    out = []
    for (top, driver), requests in files.items():
        document: dict[str, Any] = {
            "kind": KIND,
            "apiVersion": API_VERSION,
            "metadata": {
                "name": claim.name,
                "namespace": claim.namespace,
                "uid": claim_uid(claim),
                "generation": 1,
            },
        }
        if pod_claim_name:
            document["podClaimName"] = pod_claim_name
        document["requests"] = [
            {"name": name, "devices": devices} for name, devices in requests.items()
        ]
        out.append(
            {
                "path": metadata_path(claim.name, top, driver, pod_claim_name),
                "document": document,
            }
        )
    return out


def results_from_entries(devices: Iterable[dict]) -> list[DeviceRequestAllocationResult]:
    """Result-document device entries (docs/RESULT.md) as allocation results: in-cluster
    devices, plus the template devices of the first instance type listed (one node launches)."""
    entries = list(devices)
    first_it = next((d.get("instanceType") for d in entries if d.get("instanceType")), None)
    return [
        DeviceRequestAllocationResult(d["request"], d["driver"], d["pool"], d["device"])
        for d in entries
        if d.get("instanceType") in (None, first_it)
    ]


def claim_metadata(
    claim: ResourceClaim,
    devices: Iterable[dict],
    device_lookup: Callable[[DeviceID], Device | None],
    pod_claim_name: str | None = None,
) -> list[dict[str, Any]]:
    """``device_metadata`` for a claim entry of the result document."""
    return device_metadata(claim, results_from_entries(devices), device_lookup, pod_claim_name)
