"""The one entry point the command line and the Celery task share: ``simulate``.

One call runs one provisioning scheduling loop (docs/SIMULATION.md) over a typed snapshot and
returns the result document (section 4) and, on demand, the search trace (section 5).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import field
from typing import TYPE_CHECKING

from allocator.featuregates import (
    ALL_ON,
    KUBERNETES_VERSIONS,
    FeatureGateError,
    FeatureGates,
    kubernetes_version,
)
from allocator.features.bindingconditions import DEFAULT_BINDING_TIMEOUT_SECONDS
from allocator.model import Snapshot
from allocator.records import record
from allocator.trace import DEFAULT_MAX_NODES, NULL_TRACE, Trace

if TYPE_CHECKING:
    from allocator.pipeline import Pipeline
    from allocator.scheduling.tuning import Tuning

_OPTION_FIELDS = {
    "timeout",
    "kubernetesVersion",
    "featureGates",
    "disrupt",
    "trace",
    "traceMaxNodes",
    "bindingTimeoutSeconds",
    "suggestions",
}


@record
class SimulationOptions:
    """A run's options: timeout, feature gates, disruption, trace, suggestions."""

    timeout: float = 5.0
    gates: FeatureGates = ALL_ON  # effective: the preset's defaults with the overrides applied
    # The release whose gate defaults ``gates`` started from; None: every gate on.
    kubernetes_version: str | None = None
    disrupt: list[str] = field(default_factory=list)
    trace: bool = False
    trace_max_nodes: int = DEFAULT_MAX_NODES
    binding_timeout_seconds: int = DEFAULT_BINDING_TIMEOUT_SECONDS
    suggestions: bool = True  # verified fix suggestions for failed pods (docs/RESULT.md)

    @classmethod
    def from_json(cls, d: dict | None) -> SimulationOptions:
        """The API's ``options`` object; a ValueError names the offending field."""
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ValueError("options: must be an object")
        unknown = sorted(set(d) - _OPTION_FIELDS)
        if unknown:
            raise ValueError(
                f"options.{unknown[0]}: unknown option (known: {', '.join(sorted(_OPTION_FIELDS))})"
            )
        opts = cls()
        if "timeout" in d:
            value = d["timeout"]
            if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
                raise ValueError("options.timeout: must be a number of seconds > 0")
            opts.timeout = float(value)
        version = d.get("kubernetesVersion")
        if version is not None:
            if not isinstance(version, str):
                raise ValueError(
                    f"options.kubernetesVersion: must be one of {', '.join(KUBERNETES_VERSIONS)} "
                    "or null"
                )
            try:
                opts.kubernetes_version = kubernetes_version(version)
            except FeatureGateError as err:
                raise ValueError(f"options.kubernetesVersion: {err}") from None
        gates = d.get("featureGates")
        if gates is not None and not isinstance(gates, dict):
            raise ValueError("options.featureGates: must be an object of NAME: true|false")
        try:
            opts.gates = FeatureGates.for_version(opts.kubernetes_version, gates)
        except FeatureGateError as err:
            raise ValueError(f"options.featureGates: {err}") from None
        if "disrupt" in d:
            nodes = d["disrupt"]
            if not isinstance(nodes, list) or not all(isinstance(n, str) and n for n in nodes):
                raise ValueError("options.disrupt: must be a list of node names")
            opts.disrupt = list(nodes)
        for key in ("trace", "suggestions"):
            if key in d:
                if not isinstance(d[key], bool):
                    raise ValueError(f"options.{key}: must be true or false")
                setattr(opts, key, d[key])
        for key, attr in (
            ("traceMaxNodes", "trace_max_nodes"),
            ("bindingTimeoutSeconds", "binding_timeout_seconds"),
        ):
            if key in d:
                value = d[key]
                if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                    raise ValueError(f"options.{key}: must be an integer >= 1")
                setattr(opts, attr, value)
        return opts

    def to_json(self) -> dict:
        return {
            "timeout": self.timeout,
            "kubernetesVersion": self.kubernetes_version,
            "featureGates": self.gates.as_dict(),
            "disrupt": list(self.disrupt),
            "trace": self.trace,
            "traceMaxNodes": self.trace_max_nodes,
            "bindingTimeoutSeconds": self.binding_timeout_seconds,
            "suggestions": self.suggestions,
        }


@record
class SimulationOutput:
    """A run's result document, and its trace when asked for."""

    result: dict
    trace: dict | None


def simulate(
    snapshot: Snapshot,
    options: SimulationOptions | None = None,
    progress: Callable[[int, int], None] | None = None,
    pipeline: Pipeline | None = None,
    *,
    tuning: Tuning | None = None,
) -> SimulationOutput:
    """Run one scheduling loop. Raises ``DisruptionError`` (a ValueError) for unknown nodes.

    ``pipeline``: the run's device checks, constraint kinds, validators and features' state;
    by default ``build_pipeline(options.gates)``, the one place a run's pipeline is built
    (``core_pipeline(options.gates)`` runs the design without features). Its gates must be the
    options'. ``tuning``: the scheduler's fast paths, switched off only by the tests and
    benchmarks that compare them with the plain path."""
    from allocator.pipeline import build_pipeline
    from allocator.result import build_result
    from allocator.scheduling.setup import build_run
    from allocator.scheduling.tuning import DEFAULT_TUNING

    options = options or SimulationOptions()
    started = time.perf_counter()
    trace = Trace(enabled=True, max_nodes=options.trace_max_nodes) if options.trace else NULL_TRACE
    if pipeline is None:
        pipeline = build_pipeline(options.gates)  # built per run, from the run's gates
    elif pipeline.gates != options.gates:
        raise ValueError("the pipeline's feature gates differ from the options' featureGates")
    run = build_run(
        snapshot,
        pipeline,
        trace,
        timeout=options.timeout,
        disrupt=options.disrupt,
        tuning=tuning or DEFAULT_TUNING,
    )
    outcomes = run.scheduler.solve(run.pods.pending, run.pod_claims, progress)
    seconds = time.perf_counter() - started
    suggestions = None
    if options.suggestions:
        # After the loop: its final state is what every failed pod saw on its last attempt.
        from allocator.suggestions import suggest
        from allocator.suggestions.wholeloop import WholeLoop, loop_work

        def solve_again(changed: Snapshot) -> list:
            """The loop composed as this run's was, on a snapshot with a suggestion applied."""
            again = build_run(
                changed,
                build_pipeline(options.gates),
                NULL_TRACE,
                timeout=options.timeout,
                disrupt=options.disrupt,
                tuning=tuning or DEFAULT_TUNING,
            )
            return again.scheduler.solve(again.pods.pending, again.pod_claims)

        scheduler = run.scheduler
        targets = len(scheduler.existing) + len(scheduler.node_claims) + len(scheduler.templates)
        work = loop_work(outcomes, targets, run.allocator.dfs_nodes)
        whole_loop = WholeLoop.of(solve_again, outcomes, len(scheduler.existing), work)
        suggestions = suggest(snapshot, run, outcomes, whole_loop)
    result = build_result(snapshot, options, run, outcomes, seconds, suggestions=suggestions)
    return SimulationOutput(result, trace.to_json() if options.trace else None)
