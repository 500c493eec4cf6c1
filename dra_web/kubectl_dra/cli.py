"""``kubectl-dra``: the command line of the kubectl plugin.

    kubectl dra why [-n NAMESPACE] POD [--context CTX] [--kubeconfig FILE] [--region R]
                    [--no-catalog] [--kubernetes-version V] [--timeout S]
                    [--open URL [--token TOKEN]]

Exit status 0 when it answered (also when the pod would not be placed, or is not pending), 2
for bad input, an unknown pod or an unreachable cluster or server (the message on standard
error, never a traceback), 1 for a bug.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping
from typing import TextIO

from allocator.collector import collector_for_a_run
from allocator.featuregates import KUBERNETES_VERSIONS, release_of
from allocator.simulation import SimulationOptions, simulate
from allocator.snapshot import SnapshotError, load_files
from dra_web.kubectl_dra import server, why
from dra_web.kubectl_dra.kubeconfig import KubeconfigError, context_namespace, load_kubeconfig
from dra_web.snapshots import kube_import

EXIT_OK = 0
EXIT_INTERNAL = 1
EXIT_USAGE = 2


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):
        self.print_usage(sys.stderr)
        raise UsageError(f"{self.prog}: error: {message}")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="kubectl dra",
        description="Ask Karpenter's DRA scheduling simulation about the current cluster.",
    )
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    w = sub.add_parser(
        "why",
        help="why is this pod pending, and what would let it in",
        description="Reads the cluster (every kind the simulation needs), adds the AWS GPU "
        "catalog when Karpenter NodePools exist, simulates Karpenter's provisioning and "
        "explains the pod. See docs/kubectl-dra.md.",
    )
    w.add_argument("pod", metavar="POD", help="the pod's name (or pod/NAME)")
    w.add_argument("-n", "--namespace", default=None, help="the pod's namespace")
    w.add_argument("--context", default=None, help="kubeconfig context (default: current)")
    w.add_argument("--kubeconfig", default=None, metavar="FILE", help="kubeconfig file")
    w.add_argument("--region", default=None, help="AWS region of the catalog (default: the nodes')")
    w.add_argument(
        "--no-catalog", dest="catalog", action="store_false", help="do not add the AWS catalog"
    )
    w.add_argument(
        "--kubernetes-version",
        default=None,
        metavar="V",
        help="simulate the DRA feature gates of this Kubernetes release (1.34 ... 1.37)",
    )
    w.add_argument("--timeout", type=float, default=5.0, help="DFS budget per Allocate (s)")
    w.add_argument(
        "--open",
        dest="open_url",
        default=None,
        metavar="URL",
        help="also upload the snapshot to this dra-web server, start a run, print the link",
    )
    w.add_argument("--token", default=None, help="dra-web API token (default: $DRA_WEB_TOKEN)")
    return parser


def _pod_name(text: str) -> str:
    name = text.split("/", 1)[1] if text.startswith(("pod/", "pods/")) else text
    if not name or "/" in name:
        raise UsageError(f"POD: {text!r} is not a pod name (use -n NAMESPACE for the namespace)")
    return name


def _options(args, server_version: str = "") -> tuple[SimulationOptions, dict]:
    """The local simulation's options (no trace) and the server run's (with its trace, for the
    search tree of the run page), from the same flags. Without --kubernetes-version the
    cluster's own release decides the feature gates when there is a preset for it."""
    raw: dict = {"timeout": args.timeout}
    if args.kubernetes_version:
        raw["kubernetesVersion"] = args.kubernetes_version
    elif release_of(server_version) in KUBERNETES_VERSIONS:
        raw["kubernetesVersion"] = release_of(server_version)
    try:
        return SimulationOptions.from_json({**raw, "trace": False}), raw
    except ValueError as err:
        flag = "--kubernetes-version" if "kubernetesVersion" in str(err) else "--timeout"
        raise UsageError(f"{flag}: {err}") from None


def _offerings(snapshot) -> dict[str, list[why.Offering]]:
    return {
        name: [why.Offering(o.zone, o.capacity_type, o.price, o.available) for o in it.offerings]
        for name, it in snapshot.instance_types.items()
    }


def main(
    argv: list[str] | None = None,
    stdout: TextIO | None = None,
    stderr: TextIO | None = None,
    environ: Mapping[str, str] | None = None,
    transport: server.Transport = server.urllib_transport,
) -> int:
    stdout = stdout or sys.stdout
    stderr = stderr or sys.stderr
    environ = dict(os.environ if environ is None else environ)
    try:
        args = build_parser().parse_args(argv)
        return _why(args, stdout, stderr, environ, transport)
    except (UsageError, KubeconfigError, kube_import.KubeImportError, server.ServerError) as err:
        print(str(err), file=stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("interrupted", file=stderr)
        return 130
    except Exception as err:  # a bug, not bad input: say so briefly unless debugging
        if environ.get("DRA_WEB_DEBUG"):
            raise
        print(f"internal error: {type(err).__name__}: {err}", file=stderr)
        return EXIT_INTERNAL


def _why(args, stdout: TextIO, stderr: TextIO, environ: dict, transport) -> int:
    name = _pod_name(args.pod)
    _options(args)  # bad flags are refused before the cluster is read
    token = args.token or environ.get("DRA_WEB_TOKEN")
    if args.open_url:
        server.base_url(args.open_url)
        if not token:
            raise UsageError("--open: a dra-web API token is needed: --token or DRA_WEB_TOKEN")
    config = load_kubeconfig(args.kubeconfig, environ)
    namespace = args.namespace or context_namespace(config, args.context) or "default"
    listing = kube_import.list_cluster(config, context=args.context, allow_local_files=True)
    for warning in listing.warnings:
        print(f"warning: {warning}", file=stderr)
    options, raw_options = _options(args, listing.server_version)
    key = why.pod_key(namespace, name)
    pod = why.find_pod(listing.items, namespace, name)
    if pod is None:
        elsewhere = [n for n in why.namespaces_with_pod(listing.items, name) if n != namespace]
        hint = f" (a pod of that name is in namespace {', '.join(elsewhere)})" if elsewhere else ""
        raise UsageError(f"pod {key} not found in context {listing.context}{hint}")
    reason = why.not_pending(pod)
    if reason is not None:
        print(reason, file=stdout)
        return EXIT_OK
    files: list[tuple[str, bytes]] = [(listing.file_name, listing.as_json_bytes())]
    context_line = f"context {listing.context}"
    if args.catalog:
        paired = kube_import.catalog_for(listing, region=args.region)
        if paired.file is not None:
            files.append(paired.file)
        for note in paired.notes:
            print(f"catalog: {note}", file=stderr)
    with collector_for_a_run() as keep_loaded:
        try:
            snapshot = load_files(files)
        except SnapshotError as err:
            problems = "\n".join(err.problems or [str(err)])
            raise UsageError(f"the cluster's objects do not load:\n{problems}") from None
        keep_loaded()
        result = simulate(snapshot, options).result
    stdout.write(why.answer(result, key, _offerings(snapshot), context_line))
    if args.open_url:
        opened = server.open_on_server(
            args.open_url,
            token,
            files,
            f"kubectl dra why {key} ({listing.context})",
            raw_options,
            key,
            transport,
        )
        print(
            f"Opened: {opened.link}  (snapshot #{opened.snapshot}, run #{opened.run})", file=stdout
        )
    return EXIT_OK


def entry_point() -> None:  # the console script kubectl-dra
    sys.exit(main())
