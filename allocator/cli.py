"""The command line (docs/CLI.md): ``simulate`` and ``validate``, no Django needed.

Exit status 0 when the simulation completed (also when pods could not be placed), 2 for an
unusable snapshot or arguments with the message on standard error, never a traceback for bad
input. The progress bar goes to standard error, and only when that is a terminal.
"""

from __future__ import annotations

import argparse
import gc
import io
import json
import os
import sys
from typing import TextIO

from allocator import jsonwrite
from allocator.collector import collector_paused
from allocator.edits import object_patches
from allocator.featuregates import (
    KUBERNETES_VERSIONS,
    FeatureGateError,
    FeatureGates,
    kubernetes_version,
    parse_overrides,
    preset,
)

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # argparse's own errors: exit 2, message on stderr
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


def _timeout(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError("must be a number of seconds > 0")
    return value


def _kubernetes_version(text: str) -> str:
    """A release with a preset, also as a server prints it (``v1.35.2``)."""
    try:
        return kubernetes_version(text)
    except FeatureGateError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _gates(text: str) -> dict[str, bool]:
    """The overrides of ``--feature-gates``, checked at once (names and values)."""
    try:
        overrides = parse_overrides(text)
        FeatureGates.from_mapping(overrides)
    except FeatureGateError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return overrides


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m allocator",
        description="Karpenter's DRA device allocator and provisioning simulation.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sim = sub.add_parser("simulate", help="run one provisioning scheduling loop")
    sim.add_argument("snapshot", nargs="+", metavar="SNAPSHOT", help="YAML or JSON files")
    sim.add_argument("--json", action="store_true", help="print the result document")
    sim.add_argument(
        "-o",
        "--output",
        choices=("text", "json"),
        default=None,
        help="output format, as kubectl's -o: json is the same as --json (default text)",
    )
    sim.add_argument("--trace", metavar="FILE", help="also write the DFS trace as JSON")
    sim.add_argument(
        "--timeout",
        type=_timeout,
        default=5.0,
        metavar="SECONDS",
        help="per-Allocate DFS budget (default 5)",
    )
    sim.add_argument(
        "--kubernetes-version",
        type=_kubernetes_version,
        default=None,
        metavar="|".join(KUBERNETES_VERSIONS),
        help="start from that release's feature gate defaults (default: every gate on)",
    )
    sim.add_argument(
        "--feature-gates",
        type=_gates,
        default={},
        metavar="NAME=true|false,...",
        help="DRA feature gates over the defaults (every gate on, or --kubernetes-version's)",
    )
    sim.add_argument(
        "--disrupt",
        action="append",
        default=[],
        metavar="NODE",
        help="simulate consolidation of this node (repeatable)",
    )
    sim.add_argument(
        "--no-suggestions",
        dest="suggestions",
        action="store_false",
        help="skip the verified fix suggestions for failed pods",
    )
    val = sub.add_parser("validate", help="load and check a snapshot")
    val.add_argument("snapshot", nargs="+", metavar="SNAPSHOT")
    _add_catalog_parser(sub)
    return parser


def _add_catalog_parser(sub) -> None:
    from allocator.catalog import DEFAULT_REGION

    cat = sub.add_parser(
        "catalog",
        help="print a cloud's GPU/accelerator instance types as InstanceType documents",
        description="InstanceType documents (dra-web.io/v1alpha1) with capacity, Karpenter's "
        "labels, offerings and the devices the DRA drivers publish, from the data shipped "
        "with the package (allocator/catalog/aws.json; see docs/catalog.md).",
    )
    cat.add_argument("cloud", choices=["aws"], help="the cloud provider (aws)")
    cat.add_argument("--region", default=DEFAULT_REGION, help=f"region (default {DEFAULT_REGION})")
    cat.add_argument(
        "--families",
        default=None,
        metavar="p5,g6e,...",
        help="instance families, comma-separated (default: all)",
    )
    cat.add_argument("--json", action="store_true", help="print one JSON List instead of YAML")
    cat.add_argument(
        "--no-mig",
        dest="mig",
        action="store_false",
        help="full GPUs only (the GPU driver's default mode), no MIG partitions",
    )
    cat.add_argument(
        "--capacity-types",
        default="on-demand,spot",
        metavar="on-demand,spot",
        help="offerings to list (default both)",
    )
    cat.add_argument(
        "--device-plugin-resources",
        action="store_true",
        help="keep nvidia.com/gpu and aws.amazon.com/neuron* in capacity (device plugins)",
    )
    cat.add_argument(
        "--device-classes",
        action="store_true",
        help="also print the DeviceClasses the drivers install",
    )
    cat.add_argument(
        "--list", action="store_true", help="list the regions, families and sizes instead"
    )


def _load(paths: list[str], one_shot: bool = False):
    """The snapshot of ``paths``. In a one-shot process, long YAML streams are read beside the
    build (``load_paths(read_beside=True)``), and the snapshot is then frozen (``gc.freeze``):
    it lives until the process ends, so the collector's passes need never walk its millions
    of objects again (the first one after a 5,000-node load took 0.17 s)."""
    from allocator.snapshot import SnapshotError, load_paths

    for path in paths:
        if os.path.isdir(path):
            raise UsageError(f"{path}: is a directory, not a snapshot file")
        if not os.path.isfile(path):
            raise UsageError(f"{path}: no such file")
    try:
        with collector_paused():
            snapshot = load_paths(paths, read_beside=one_shot)
            if one_shot:
                gc.freeze()
        return snapshot
    except SnapshotError as err:
        problems = err.problems or [str(err)]
        raise UsageError("\n".join(problems)) from None
    except OSError as err:
        raise UsageError(f"{err.filename or paths[0]}: {err.strerror or err}") from None


def main(
    argv: list[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    *,
    one_shot: bool = False,
) -> int:
    """The command line; ``one_shot``: this process ends with the command (``python -m
    allocator``) and runs nothing beside it, so a long YAML stream is read by a forked reader
    while it builds, and what it loads may be frozen for the collector (``_load``)."""
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    try:
        args = build_parser().parse_args(argv)
        if args.command == "validate":
            return _validate(args, stdout, one_shot)
        if args.command == "catalog":
            return _catalog(args, stdout)
        return _simulate(args, stdout, stderr, one_shot)
    except UsageError as err:
        print(str(err), file=stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=stderr)
        return 130
    except BrokenPipeError:  # `... | head`: the reader has all it wanted
        return EXIT_OK
    except Exception as err:  # a bug, not bad input: say so briefly unless debugging
        if os.environ.get("DRA_WEB_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err}", file=stderr)
        return EXIT_INTERNAL


def _validate(args, stdout: TextIO, one_shot: bool) -> int:
    snapshot = _load(args.snapshot, one_shot)
    counts = snapshot.object_counts()
    total = sum(counts.values())
    print(f"ok: {total} objects ({_counts(counts)})", file=stdout)
    for warning in [*snapshot.warnings, *snapshot.unsimulated]:
        print(f"warning: {warning}", file=stdout)
    return EXIT_OK


def _catalog(args, stdout: TextIO) -> int:
    from allocator.catalog import aws
    from allocator.catalog.render import to_yaml

    if args.list:
        stdout.write(aws.listing())
        return EXIT_OK
    families = None if args.families is None else args.families.split(",")
    options = aws.CatalogOptions(
        mig=args.mig,
        capacity_types=tuple(t.strip() for t in args.capacity_types.split(",") if t.strip()),
        device_plugin_resources=args.device_plugin_resources,
    )
    try:
        documents = aws.instance_types(args.region, families, options)
    except aws.CatalogError as err:
        raise UsageError(f"catalog aws: {err}") from None
    if args.device_classes:
        documents = aws.device_classes(aws.drivers_of(documents)) + documents
    if args.json:
        json.dump({"apiVersion": "v1", "kind": "List", "items": documents}, stdout, indent=1)
        stdout.write("\n")
    else:
        stdout.write(to_yaml(documents, aws.yaml_header(args.region, len(documents))))
    return EXIT_OK


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items())) or "empty"


def _simulate(args, stdout: TextIO, stderr: TextIO, one_shot: bool) -> int:
    from allocator.scheduling.disruption import DisruptionError
    from allocator.simulation import SimulationOptions, simulate

    snapshot = _load(args.snapshot, one_shot)
    options = SimulationOptions(
        timeout=args.timeout,
        gates=FeatureGates.for_version(args.kubernetes_version, args.feature_gates),
        kubernetes_version=args.kubernetes_version,
        disrupt=list(args.disrupt),
        trace=args.trace is not None,
        suggestions=args.suggestions,
    )
    if args.trace is not None:
        directory = os.path.dirname(os.path.abspath(args.trace))
        if not os.path.isdir(directory):
            raise UsageError(f"--trace: directory {directory} does not exist")
    bar = ProgressBar(stderr) if _is_tty(stderr) else None
    try:
        output = simulate(snapshot, options, bar.update if bar else None)
    except DisruptionError as err:
        raise UsageError(str(err)) from None
    finally:
        if bar:
            bar.close()
    if args.trace is not None:
        try:
            with open(args.trace, "wb") as fh:
                fh.write(jsonwrite.to_bytes(output.trace))
        except OSError as err:
            raise UsageError(f"--trace: {args.trace}: {err.strerror or err}") from None
    # The snapshot's warnings, then the run's (words that could not be built, where
    # Karpenter's own search could stall): the result's.
    _print_warnings(output.result["warnings"], stderr)
    if args.json or args.output == "json":
        _write_json(stdout, output.result)
    else:
        stdout.write(summary(output.result, node_pools=len(snapshot.node_pools)))
    return EXIT_OK


def _write_json(stdout: TextIO, value: dict) -> None:
    """The document, indented, then a newline: as bytes straight to a real stream's buffer (a
    result of tens of megabytes is not copied into a string and encoded again)."""
    data = jsonwrite.to_bytes(value, indent=True)
    if isinstance(stdout, io.TextIOWrapper):
        stdout.flush()
        stdout.buffer.write(data)
        stdout.buffer.write(b"\n")
    else:
        stdout.write(data.decode("utf-8"))
        stdout.write("\n")


MAX_WARNINGS_SHOWN = 10


def _print_warnings(warnings: list[str], stderr: TextIO) -> None:
    """What was skipped (unknown kinds, legacy keys...) and what the run warns of, on standard
    error, as kubectl warns, so standard output stays the summary or the JSON; a long list is
    cut short (every one is in the result's ``warnings``)."""
    for warning in warnings[:MAX_WARNINGS_SHOWN]:
        print(f"warning: {warning}", file=stderr)
    if len(warnings) > MAX_WARNINGS_SHOWN:
        rest = len(warnings) - MAX_WARNINGS_SHOWN
        print(f"warning: ... and {rest} more (see --json: warnings)", file=stderr)


def _is_tty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressBar:
    WIDTH = 30

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        self.shown = -1

    def update(self, done: int, total: int) -> None:
        filled = self.WIDTH * done // max(total, 1)
        if filled == self.shown and done != total:
            return
        self.shown = filled
        bar = "#" * filled + "." * (self.WIDTH - filled)
        self.stream.write(f"\r[{bar}] {done}/{total} pod attempts")
        self.stream.flush()

    def close(self) -> None:
        if self.shown >= 0:
            self.stream.write("\n")
            self.stream.flush()


# --- the human summary -----------------------------------------------------------------------


def _table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [len(h) for h in headers]
    for row in rows:
        for i, cell in enumerate(row):
            widths[i] = max(widths[i], len(cell))
    lines = []
    for row in [headers, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row)]
        lines.append("  ".join(cells).rstrip())
    return "\n".join(lines) + "\n"


def _devices_cell(pod: dict) -> str:
    """The devices a pod got, each named by its driver: in-cluster devices as
    ``driver/pool: device, device``, template devices as ``instance-type driver: device`` (the
    first instance type of the NodeClaim, the others counted)."""
    cluster: dict[str, list[str]] = {}
    by_it: dict[str, dict[str, list[str]]] = {}
    for claim in pod["claims"]:
        for d in claim["devices"]:
            if d["source"] == "template":
                names = by_it.setdefault(d["instanceType"], {}).setdefault(d["driver"], [])
            else:
                names = cluster.setdefault(f"{d['driver']}/{d['pool']}", [])
            if d["device"] not in names:
                names.append(d["device"])

    def listed(names: list[str]) -> str:
        return ", ".join(names[:4]) + (f" +{len(names) - 4}" if len(names) > 4 else "")

    parts = [f"{where}: {listed(names)}" for where, names in cluster.items()]
    if by_it:
        its = sorted(by_it)
        more = f" (+{len(its) - 1} more types)" if len(its) > 1 else ""
        drivers = "; ".join(f"{driver}: {listed(names)}" for driver, names in by_it[its[0]].items())
        parts.append(f"{its[0]} {drivers}{more}")
    return "; ".join(parts) or "-"


def _target_cell(target: dict | None) -> str:
    if target is None:
        return "-"
    suffix = " (new)" if target.get("new") else ""
    return f"{target['kind']} {target['name']}{suffix}"


MAX_REASONS = 12
MAX_REASON_CHARS = 160


def _clip(text: str) -> str:
    from allocator.funnel import clip_words

    return clip_words(text, MAX_REASON_CHARS)


MAX_ERROR_CHARS = 200


def _error_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """A pod's ``error`` on one line. Karpenter's message opens with what was tried and ends
    with the decisive cause, so a long one keeps its head and its tail, cut between words."""
    text = " ".join((text or "").split())
    if len(text) <= limit:
        return text
    head_end = text.rfind(" ", 0, limit // 3)
    head = text[: head_end if head_end > 0 else limit // 3].rstrip(" ;,")
    tail_start = text.find(" ", len(text) - (limit - len(head) - 5))
    tail = text[tail_start + 1 :] if tail_start > 0 else text[-(limit - len(head) - 5) :]
    return f"{head} ... {tail}"


MAX_FUNNELS = 6


def _funnel_lines(pod: dict) -> list[str]:
    """The pod's refusal funnels (``explanation``), two lines each: which devices were in
    reach, and what refused them."""
    from allocator.funnel import summary_lines

    funnels = pod.get("explanation") or []
    if not funnels:
        return []
    lines = ["  why:\n"]
    for entry in funnels[:MAX_FUNNELS]:
        lines.extend(line + "\n" for line in summary_lines(entry, "    "))
    if len(funnels) > MAX_FUNNELS:
        lines.append(f"    ... {len(funnels) - MAX_FUNNELS} more funnels (see --json)\n")
    return lines


def _reason_target(reason: dict) -> str:
    """A ``reasons`` entry's target, with how many more refused the pod the same way."""
    more = int(reason.get("targets") or 1) - 1
    return f"  {reason['target']}" + (f" (+{more} alike)" if more > 0 else "")


def _suggestion_line(pod: dict) -> str:
    """The first verified suggestion of a failed pod, one line (empty when none)."""
    suggestions = pod.get("suggestions") or []
    if not suggestions:
        return ""
    first = suggestions[0]
    more = f" (+{len(suggestions) - 1} more, see --json)" if len(suggestions) > 1 else ""
    line = f"  suggestion [{first['kind']}]: {first['message']}{more}\n"
    return line + _patch_lines(first)


def _patch_lines(suggestion: dict) -> str:
    """The suggestion's JSON patch as ``kubectl patch --type json`` takes it, and the recreate
    steps when the object cannot change in place (allocator/edits.py)."""
    out = []
    for entry in suggestion.get("changes") or [suggestion]:
        change = entry.get("change") if isinstance(entry.get("change"), dict) else entry
        if not entry.get("patch"):
            continue
        for one in object_patches(entry, change):  # a workload-wide change: every replica
            kind, _, ref = str(one.get("object") or "").partition(" ")
            ns, slash, name = ref.partition("/")
            where = f"-n {ns} {name}" if slash else ref
            body = json.dumps(one.get("patch"), separators=(",", ":"))
            if not entry.get("recreate"):
                line = f"kubectl patch {kind.lower()} {where} --type json -p '{body}'"
                out.append(f"    patch: {line}\n")
            else:  # the API server refuses it in place: it edits the manifest that is recreated
                out.append(f"    patch of the saved manifest ({kind} {ref}): {body}\n")
        if entry.get("recreate"):
            out.append(f"    recreate ({entry.get('workload') or 'the object'}):\n")
            out.extend(f"      {step}\n" for step in entry.get("recreateSteps") or [])
    return "".join(out)


def gates_line(result: dict) -> str:
    """Which feature gates the run had: a release's defaults, or everything on (said so, since
    a real cluster never runs that way), and the gates set apart from that default."""
    gates = result.get("featureGates") or {}
    version = result.get("kubernetesVersion")
    base = preset(version) if version else dict.fromkeys(gates, True)
    changed = [f"{g}={'true' if on else 'false'}" for g, on in gates.items() if base.get(g) != on]
    if version:
        on = [g for g, value in base.items() if value]
        head = (
            f"Feature gates: Kubernetes {version} defaults "
            f"({len(on)} of {len(base)} on: {', '.join(on) or 'none'})"
        )
    else:
        head = "Feature gates: every DRA feature on (no --kubernetes-version)"
    return head + (f"; set: {', '.join(changed)}" if changed else "")


def _zones_cell(requirements: list[dict]) -> str:
    """The zones a NodeClaim may launch in (its zone requirement), ``any`` when unconstrained."""
    for r in requirements:
        if r["key"] == "topology.kubernetes.io/zone" and r["operator"] == "In":
            return ", ".join(r["values"])
    return "any"


def summary(result: dict, node_pools: int | None = None) -> str:
    """The human summary of a result. ``node_pools``: how many NodePools the snapshot has (a
    line says so when there are none: no pod can get a new NodeClaim)."""
    stats = result["stats"]
    ignored = result.get("ignoredPods") or []
    also = f", {len(ignored)} ignored" if ignored else ""
    out = [
        f"Pods: {stats['pods']} pending, {stats['scheduled']} scheduled, "
        f"{stats['failed']} failed{also}  (DFS nodes {stats['dfsNodes']}, "
        f"{stats['seconds']:.3f}s)\n\n"
    ]
    out.append(gates_line(result) + "\n\n")
    if node_pools == 0:
        out.append(
            "No NodePool in the snapshot: pods can only go to existing nodes, no NodeClaim "
            "can be launched.\n\n"
        )
    if result["pods"]:
        rows = [
            [
                p["pod"],
                "yes" if p["scheduled"] else "NO",
                _target_cell(p["target"]),
                _devices_cell(p),
            ]
            for p in result["pods"]
        ]
        out.append(_table(["POD", "SCHEDULED", "TARGET", "DEVICES"], rows))
        relaxed = [p for p in result["pods"] if p.get("relaxed")]
        if relaxed:
            out.append("\nPlaced after relaxing preferences:\n")
            for p in relaxed:
                dropped = ", ".join(r["kind"] for r in p["relaxed"])
                out.append(f"{p['pod']}: {dropped}\n")
    if result["nodeClaims"]:
        out.append("\nNew NodeClaims:\n")
        rows = []
        for nc in result["nodeClaims"]:
            its = nc["instanceTypes"]
            shown = ", ".join(its[:3]) + (f" +{len(its) - 3}" if len(its) > 3 else "")
            price = f"${nc['price']:.4f}/h" if nc.get("price") is not None else "-"
            drivers = nc["annotations"].get("karpenter.sh/requested-dra-drivers", "-")
            zones = _zones_cell(nc["requirements"])
            rows.append(
                [nc["name"], nc["nodePool"], shown, zones, price, str(len(nc["pods"])), drivers]
            )
        header = ["NAME", "NODEPOOL", "INSTANCE TYPES", "ZONES", "CHEAPEST", "PODS", "DRA DRIVERS"]
        out.append(_table(header, rows))
    failures = [p for p in result["pods"] if not p["scheduled"]]
    if failures:
        out.append("\nFailures:\n")
        for p in failures:
            reasons = p.get("reasons") or []
            out.append(f"{p['pod']}: {_error_line(p.get('error') or 'not scheduled')}\n")
            cause = p.get("cause") or {}
            if cause.get("message"):
                out.append(f"  cause: {_error_line(cause['message'], 2 * MAX_ERROR_CHARS)}\n")
            if reasons:
                rows = [[_reason_target(r), _clip(r["reason"])] for r in reasons[:MAX_REASONS]]
                out.append(_table(["  TARGET", "REASON"], rows))
                if len(reasons) > MAX_REASONS:
                    out.append(f"  ... {len(reasons) - MAX_REASONS} more targets (see --json)\n")
            out.extend(_funnel_lines(p))
            out.append(_suggestion_line(p))
    if ignored:
        out.append("\nIgnored (Karpenter does not provision for these pods):\n")
        rows = [["  " + entry["pod"], _clip(entry["reason"])] for entry in ignored]
        out.append(_table(["  POD", "REASON"], rows))
    gating = [g for g in result.get("initializationGating", []) if g["status"] != "Initialized"]
    if gating:
        out.append("\nInitialization gating:\n")
        for g in gating:
            out.append(
                f"{g['nodeClaim']} (node {g['node'] or '-'}): {g['status']} {g['reason']}, "
                f"missing {', '.join(g['missingDrivers'])}\n"
            )
    disruption = result.get("disruption")
    if disruption:
        verdict = "all displaced pods placed" if disruption["allPlaced"] else "NOT all placed"
        out.append(
            f"\nDisruption of {', '.join(disruption['candidates'])}: "
            f"{len(disruption['displacedPods'])} displaced pods, {verdict}\n"
        )
    return "".join(out)
