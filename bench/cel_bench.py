"""Cost of the DRA CEL environment: Environment build, compile, evaluation, memo hit.

Run: .venv/bin/python bench/cel_bench.py
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from allocator.model import Device, DeviceCapacity, Version  # noqa: E402
from allocator.quantity import Quantity  # noqa: E402

MODELS = ["H100", "A100", "L40S", "B200"]
TYPICAL = (
    'device.driver == "gpu.nvidia.com" && '
    'device.attributes["gpu.nvidia.com"].productName.startsWith("NVIDIA H100") && '
    'device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0'
)


def gpu(i: int) -> Device:
    return Device(
        name=f"gpu-{i}",
        attributes={
            "productName": f"NVIDIA {MODELS[i % 4]} 80GB HBM3",
            "model": MODELS[i % 4],
            "architecture": "Hopper",
            "driverVersion": Version("550.54.15"),
            "uuid": f"GPU-{i:08x}",
            "resource.kubernetes.io/pcieRoot": f"pci0000:{i % 8:02x}",
        },
        capacity={"memory": DeviceCapacity(Quantity.parse("80Gi"))},
    )


def per_call(fn, n: int) -> float:
    t = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t) / n * 1e6


def main() -> None:
    t = time.perf_counter()
    from allocator.cel import SelectorEngine

    engine = SelectorEngine()
    print(f"import + first Environment: {(time.perf_counter() - t) * 1e3:.0f} ms")

    t = time.perf_counter()
    SelectorEngine()
    print(f"second SelectorEngine: {(time.perf_counter() - t) * 1e6:.0f} us")

    t = time.perf_counter()
    sel = engine.compile(TYPICAL)
    print(f"compile typical selector: {(time.perf_counter() - t) * 1e3:.2f} ms")

    dev = gpu(0)
    view = engine._view(dev, "gpu.nvidia.com")
    view.cel()
    us = per_call(lambda: engine._evaluate(sel, view), 2000)
    print(f"evaluation (typical selector, activation prebuilt): {us:.0f} us")
    simple = engine.compile('device.attributes["gpu.nvidia.com"].model == "H100"')
    us = per_call(lambda: engine._evaluate(simple, view), 2000)
    print(f'evaluation (model == "H100"): {us:.0f} us')

    engine.matches(sel, dev, "gpu.nvidia.com")
    us = per_call(lambda: engine.matches(sel, dev, "gpu.nvidia.com"), 20000)
    print(f"memo hit (same device): {us:.2f} us")

    devices = [gpu(i) for i in range(1000)]
    fresh = SelectorEngine()
    s = fresh.compile(TYPICAL)
    t = time.perf_counter()
    for d in devices:
        fresh.matches(s, d, "gpu.nvidia.com")
    first = (time.perf_counter() - t) * 1e3
    t = time.perf_counter()
    for d in devices:
        fresh.matches(s, d, "gpu.nvidia.com")
    second = (time.perf_counter() - t) * 1e3
    print(
        f"1000 devices, 4 models: first pass {first:.1f} ms ({fresh.evaluations} evaluations), "
        f"second pass {second:.2f} ms"
    )
    others = [gpu(i) for i in range(1000)]  # new Device objects, values already seen
    t = time.perf_counter()
    for d in others:
        fresh.matches(s, d, "gpu.nvidia.com")
    us = (time.perf_counter() - t) * 1e6 / len(others)
    print(f"memo hit (new device, same read values: view + key): {us:.1f} us")
    dyn = fresh.compile('device.attributes["gpu.nvidia.com"].exists(k, k == "uuid")')
    t = time.perf_counter()
    for d in devices:
        fresh.matches(dyn, d, "gpu.nvidia.com")
    print(
        f"1000 devices, dynamic selector (whole-device key): {(time.perf_counter() - t) * 1e3:.0f} ms"
    )


if __name__ == "__main__":
    main()
