"""Kubernetes DRA feature gates: all on by default (a debugger shows everything), or a
Kubernetes release's defaults (``--kubernetes-version``, ``preset``)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import field

from allocator.records import record

GATE_NAMES: tuple[str, ...] = (
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
)


class FeatureGateError(ValueError):
    pass


# The releases a preset exists for (docs/CLI.md: ``--kubernetes-version``).
KUBERNETES_VERSIONS: tuple[str, ...] = ("1.34", "1.35", "1.36", "1.37")

# Each gate's lifecycle as Kubernetes publishes it: (first release of the stage, stage, default).
# A gate's default in a release is that of the last stage that began at or before it; a gate
# with no stage yet did not exist in that release and is off (the feature is not there).
# Sources: kubernetes/kubernetes pkg/features/kube_features.go, the VersionedSpecs of
# defaultVersionedKubernetesFeatureGates (the 1.35 tree, and the 1.37 tree where the DRA gates
# of kube-scheduler are listed with every stage), cross-checked with the kubernetes/website
# pages content/en/docs/reference/command-line-tools-reference/feature-gates/<Gate>.md.
GATE_STAGES: dict[str, tuple[tuple[str, str, bool], ...]] = {
    "DRADeviceTaints": (("1.33", "alpha", False), ("1.36", "beta", True), ("1.37", "GA", True)),
    # Split from DRADeviceTaints in 1.35 (DeviceTaintRule objects); before, that gate held both.
    "DRADeviceTaintRules": (
        ("1.35", "alpha", False),
        ("1.36", "beta", False),
        ("1.37", "GA", True),
    ),
    "DRADeviceBindingConditions": (("1.34", "alpha", False), ("1.36", "beta", True)),
    "DRAPrioritizedList": (("1.33", "alpha", False), ("1.34", "beta", True), ("1.36", "GA", True)),
    "DRAAdminAccess": (("1.32", "alpha", False), ("1.34", "beta", True), ("1.36", "GA", True)),
    "DRAPartitionableDevices": (("1.33", "alpha", False), ("1.36", "beta", True)),
    "DRADeviceCompatibilityGroups": (("1.37", "alpha", False),),
    "DRAConsumableCapacity": (("1.34", "alpha", False), ("1.36", "beta", True)),
    "DRAListTypeAttributes": (("1.36", "alpha", False),),
    "DRANodeAllocatableResources": (("1.36", "alpha", False),),
    "DRAOptionalNodeOperations": (("1.37", "alpha", False),),
    # Not in kube_features.go's scheduler list (an API of kube-apiserver and the controller
    # manager): the website's DRAResourcePoolStatus page, alpha since 1.36, off.
    "DRAResourcePoolStatus": (("1.36", "alpha", False),),
    "DRAExtendedResource": (("1.34", "alpha", False), ("1.36", "beta", True), ("1.37", "GA", True)),
}


def _release(version: str) -> tuple[int, int]:
    major, minor = version.split(".")
    return int(major), int(minor)


def gate_stage(name: str, version: str) -> tuple[str, bool] | None:
    """(stage, default) of a gate in a release, or None when the gate did not exist yet."""
    found = None
    for since, stage, default in GATE_STAGES[name]:
        if _release(since) <= _release(version):
            found = (stage, default)
    return found


def preset(version: str) -> dict[str, bool]:
    """Every gate's default in a Kubernetes release (``1.34`` ...); absent gates are off."""
    version = kubernetes_version(version)
    return {name: (gate_stage(name, version) or ("", False))[1] for name in GATE_NAMES}


_VERSION = re.compile(r"^v?(\d+)\.(\d+)(?:[.+-].*)?$")


def release_of(text: str) -> str | None:
    """``major.minor`` of a Kubernetes version string (``v1.34.2-eks-113cf36``, ``1.35``,
    ``1.36+``), or None when it is not one."""
    match = _VERSION.match(text.strip()) if isinstance(text, str) else None
    return f"{int(match.group(1))}.{int(match.group(2))}" if match else None


def kubernetes_version(text: str) -> str:
    """The preset a version string names; FeatureGateError when there is none for it."""
    release = release_of(text)
    if release not in KUBERNETES_VERSIONS:
        raise FeatureGateError(
            f"no feature gate preset for Kubernetes {text!r}; "
            f"known versions: {', '.join(KUBERNETES_VERSIONS)}"
        )
    return release


@record(frozen=True)
class FeatureGates:
    """Effective gate values; ``enabled("DRADeviceTaints")`` is the one way to ask."""

    values: tuple[tuple[str, bool], ...] = field(
        default_factory=lambda: tuple((name, True) for name in GATE_NAMES)
    )
    # ``values`` by name (the first of a name wins, as a scan finds it): asked per device.
    _index: dict[str, bool] = field(default=None, init=False, repr=False, compare=False, hash=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        index: dict[str, bool] = {}
        for gate, value in self.values:
            index.setdefault(gate, value)
        object.__setattr__(self, "_index", index)

    def enabled(self, name: str) -> bool:
        value = self._index.get(name)
        if value is None:
            raise FeatureGateError(f"unknown feature gate {name!r}")
        return value

    def as_dict(self) -> dict[str, bool]:
        return dict(self.values)

    @classmethod
    def from_mapping(
        cls, overrides: Mapping[str, bool] | None, base: Mapping[str, bool] | None = None
    ) -> FeatureGates:
        """``overrides`` over ``base`` (a preset; every gate on when None)."""
        merged = dict(base) if base is not None else dict.fromkeys(GATE_NAMES, True)
        for name, value in (overrides or {}).items():
            if name not in merged:
                raise FeatureGateError(
                    f"unknown feature gate {name!r}; known gates: {', '.join(GATE_NAMES)}"
                )
            if not isinstance(value, bool):
                raise FeatureGateError(f"feature gate {name}: value must be true or false")
            merged[name] = value
        return cls(tuple(merged.items()))

    @classmethod
    def parse(cls, text: str, base: Mapping[str, bool] | None = None) -> FeatureGates:
        """Parse the command line form ``Name=true,Other=false`` (over ``base``)."""
        return cls.from_mapping(parse_overrides(text), base)

    @classmethod
    def for_version(
        cls, version: str | None, overrides: Mapping[str, bool] | None = None
    ) -> FeatureGates:
        """A release's defaults (every gate on when ``version`` is None) with ``overrides``."""
        return cls.from_mapping(overrides, preset(version) if version is not None else None)


def parse_overrides(text: str) -> dict[str, bool]:
    """``Name=true,Other=false`` as a mapping; names are checked when it is applied."""
    overrides: dict[str, bool] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep or value.strip().lower() not in ("true", "false"):
            raise FeatureGateError(f"--feature-gates: {item!r} is not NAME=true|false")
        overrides[name.strip()] = value.strip().lower() == "true"
    return overrides


ALL_ON = FeatureGates()
