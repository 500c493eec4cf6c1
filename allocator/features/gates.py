"""Kubernetes DRA feature gates, all on by default (a debugger shows everything)."""

from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(slots=True, frozen=True)
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
    def from_mapping(cls, overrides: dict[str, bool] | None) -> FeatureGates:
        merged = dict.fromkeys(GATE_NAMES, True)
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
    def parse(cls, text: str) -> FeatureGates:
        """Parse the command line form ``Name=true,Other=false``."""
        overrides: dict[str, bool] = {}
        for item in filter(None, (part.strip() for part in text.split(","))):
            name, sep, value = item.partition("=")
            if not sep or value.strip().lower() not in ("true", "false"):
                raise FeatureGateError(f"--feature-gates: {item!r} is not NAME=true|false")
            overrides[name.strip()] = value.strip().lower() == "true"
        return cls.from_mapping(overrides)


ALL_ON = FeatureGates()
