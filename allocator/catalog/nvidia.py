"""The devices NVIDIA's GPU DRA driver (driver ``gpu.nvidia.com``) publishes for a node's GPUs.

Shapes follow the driver (github.com/NVIDIA/k8s-dra-driver-gpu, cmd/gpu-kubelet-plugin):

* a full GPU is ``gpu-<minor>`` with attributes ``type: gpu``, ``uuid``, ``productName``,
  ``brand``, ``architecture`` and the versions ``cudaComputeCapability``, ``driverVersion``,
  ``cudaDriverVersion`` (semantic versions, as the driver prints them), capacity ``memory``;
* with MIG partitions (the driver's DynamicMIG mode, KEP-4815 partitionable devices), each GPU
  also has one counter set ``gpu-<minor>-counter-set`` holding every capacity dimension of the
  largest MIG profile and one ``memory-slice-<i>`` counter per memory slice; every profile and
  placement is a device ``gpu-<minor>-mig-<profile>-<profile id>-<placement start>`` of
  ``type: mig`` consuming its capacities and the memory slices of its placement, and the full
  GPU consumes all of them, so that a GPU is either whole or partitioned. One slice template
  per GPU, devices sorted by name, as the driver publishes them on Kubernetes 1.34.

Where this differs from the driver, on purpose: the full GPU's ``memory`` is EC2's figure for
the GPU (the driver announces NVML's total, or in DynamicMIG mode the largest profile's), so
that the catalog agrees with the instance type's ``karpenter.k8s.aws/instance-gpu-memory``;
``uuid`` values are placeholders derived from the instance type and the GPU index.
"""

from __future__ import annotations

import re
import uuid
from fractions import Fraction

from allocator.quantity import BINARY_SI, Quantity

DRIVER = "gpu.nvidia.com"
UUID_NAMESPACE = uuid.UUID("6f1c5e0a-5b1d-4a52-9d8e-2f0c3c9a7d41")

# MIG capacity dimensions as the driver names them (capacity names), and its counter names
# for them (the capacity name in DNS form).
_MIG_CAPACITIES = (
    ("multiprocessors", "multiprocessors", "multiprocessors"),
    ("copyEngines", "copy-engines", "copyEngines"),
    ("decoders", "decoders", "decoders"),
    ("encoders", "encoders", "encoders"),
    ("jpegEngines", "jpeg-engines", "jpegEngines"),
    ("ofaEngines", "ofa-engines", "ofaEngines"),
)


def gpu_uuid(instance_type: str, index: int) -> str:
    """A placeholder in NVIDIA's ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` form, the same
    for the same instance type and GPU index on every call."""
    return f"GPU-{uuid.uuid5(UUID_NAMESPACE, f'{instance_type}/gpu-{index}')}"


def semver(text: str) -> str:
    """A version as the driver publishes it (Masterminds semver's String(): three numbers, no
    leading zeros): ``580.95.05`` -> ``580.95.5``, ``9.0`` -> ``9.0.0``."""
    parts = [str(int(p)) for p in text.split(".")[:3]]
    return ".".join(parts + ["0"] * (3 - len(parts)))


def _bytes(mib: int) -> str:
    return Quantity(Fraction(mib * 2**20), BINARY_SI).canonical()


def _count(value: int) -> dict:
    return {"value": str(value)}


def _common_attributes(model: dict, driver: dict) -> dict:
    return {
        "productName": {"string": model["productName"]},
        "brand": {"string": model["brand"]},
        "architecture": {"string": model["architecture"]},
        "cudaComputeCapability": {"version": semver(model["cudaComputeCapability"])},
        "driverVersion": {"version": semver(driver["driverVersion"])},
        "cudaDriverVersion": {"version": semver(driver["cudaDriverVersion"])},
    }


def full_gpu(instance_type: str, index: int, model: dict, driver: dict) -> dict:
    attributes = {
        "type": {"string": "gpu"},
        "uuid": {"string": gpu_uuid(instance_type, index)},
        **_common_attributes(model, driver),
    }
    return {
        "name": f"gpu-{index}",
        "attributes": attributes,
        "capacity": {"memory": {"value": _bytes(model["memoryMiB"])}},
    }


def mig_device_name(index: int, profile: str, profile_id: int, start: int) -> str:
    """``gpu-0-mig-1g10gb-19-0``: the profile without dots, ``+`` as ``-`` (RFC 1123)."""
    pname = re.sub(r"[^a-z0-9-]", "-", profile.lower().replace(".", "")).strip("-")
    return f"gpu-{index}-mig-{pname}-{profile_id}-{start}"


def _largest(profiles: list[dict], key: str) -> int:
    return max(p[key] for p in profiles)


def counter_set_name(index: int) -> str:
    return f"gpu-{index}-counter-set"


def _mig_capacity(profile: dict) -> dict:
    capacity = {name: _count(profile[key]) for name, _, key in _MIG_CAPACITIES}
    capacity["memory"] = {"value": _bytes(profile["memoryMiB"])}
    return capacity


def _mig_counters(profile: dict, start: int, size: int) -> dict:
    counters = {counter: _count(profile[key]) for _, counter, key in _MIG_CAPACITIES}
    counters["memory"] = {"value": _bytes(profile["memoryMiB"])}
    for slice_index in range(start, start + size):
        counters[f"memory-slice-{slice_index}"] = {"value": "1"}
    return counters


def partitioned_gpu(instance_type: str, index: int, model: dict, driver: dict) -> dict:
    """One slice template: the GPU's counter set, the full GPU and every MIG placement."""
    mig = model["mig"]
    profiles = mig["profiles"]
    largest = {key: _largest(profiles, key) for _, _, key in _MIG_CAPACITIES}
    largest["memoryMiB"] = model["memoryMiB"]
    whole = _mig_counters(largest, 0, mig["memorySlices"])
    counter_set = counter_set_name(index)
    gpu = full_gpu(instance_type, index, model, driver)
    gpu["capacity"] = _mig_capacity(largest)
    full = _mig_counters(largest, 0, mig["memorySlices"])
    gpu["consumesCounters"] = [{"counterSet": counter_set, "counters": full}]
    devices = [gpu]
    parent = gpu["attributes"]["uuid"]["string"]
    for profile in profiles:
        for start in profile["placements"]:
            devices.append(
                {
                    "name": mig_device_name(index, profile["profile"], profile["id"], start),
                    "attributes": {
                        "type": {"string": "mig"},
                        "parentUUID": {"string": parent},
                        "profile": {"string": profile["profile"]},
                        **_common_attributes(model, driver),
                    },
                    "capacity": _mig_capacity(profile),
                    "consumesCounters": [
                        {
                            "counterSet": counter_set,
                            "counters": _mig_counters(profile, start, profile["size"]),
                        }
                    ],
                }
            )
    devices.sort(key=lambda d: d["name"])
    return {
        "driver": DRIVER,
        "pool": {"name": instance_type},
        "sharedCounters": [{"name": counter_set, "counters": whole}],
        "devices": devices,
    }


def gpu_templates(
    instance_type: str, model: dict, count: int, driver: dict, *, mig: bool
) -> list[dict]:
    """The resourceSliceTemplates of an instance type with ``count`` GPUs of ``model``."""
    if mig and "mig" in model:
        return [partitioned_gpu(instance_type, i, model, driver) for i in range(count)]
    devices = [full_gpu(instance_type, i, model, driver) for i in range(count)]
    return [{"driver": DRIVER, "pool": {"name": instance_type}, "devices": devices}]
