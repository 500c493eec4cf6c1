"""The pod fields behind volumes, host ports and whether Karpenter provisions for a pod.

Read for every Pod (and every DaemonSet's pod template): the PersistentVolumeClaims its volumes
use, its containers' host ports, its scheduling gates and the status kube-scheduler left on it.
"""

from __future__ import annotations

from allocator.model import ContainerHostPort, OwnerReference, PodCondition, PodVolume
from allocator.snapshot.fields import Context

PROTOCOLS = ("TCP", "UDP", "SCTP")
_MAX_PORT = 65535


def read_volumes(ctx: Context, spec: dict, pod_name: str, path: str = "spec.volumes") -> list:
    """The volumes backed by a PersistentVolumeClaim; an ephemeral volume's claim is named
    ``<pod>-<volume>`` as the ephemeral volume controller names it."""
    out: list[PodVolume] = []
    for p, v in ctx.items(spec, "volumes", path):
        name = ctx.str(v, "name", f"{p}.name", required=True)
        claim = ctx.map(v, "persistentVolumeClaim", f"{p}.persistentVolumeClaim")
        ephemeral = ctx.map(v, "ephemeral", f"{p}.ephemeral")
        if v.get("persistentVolumeClaim") is not None:
            claim_name = ctx.str(claim, "claimName", f"{p}.persistentVolumeClaim.claimName", True)
            if name and claim_name:
                out.append(PodVolume(name, claim_name))
        elif v.get("ephemeral") is not None:
            tp = f"{p}.ephemeral.volumeClaimTemplate"
            template = ctx.map(ephemeral, "volumeClaimTemplate", tp, required=True)
            has_template = isinstance(ephemeral.get("volumeClaimTemplate"), dict)
            tspec = ctx.map(template, "spec", f"{tp}.spec", required=has_template)
            storage_class = ctx.str(tspec, "storageClassName", f"{tp}.spec.storageClassName")
            if name:
                out.append(PodVolume(name, f"{pod_name}-{name}", True, storage_class))
    return out


def read_host_ports(ctx: Context, spec: dict, key: str, path: str) -> tuple:
    """Ports of ``spec[key]`` (containers or initContainers) that bind a host port."""
    out: list[ContainerHostPort] = []
    for cp, c in ctx.items(spec, key, path):
        container = c.get("name") if isinstance(c.get("name"), str) else ""
        for p, port in ctx.items(c, "ports", f"{cp}.ports"):
            number = ctx.int(port, "containerPort", f"{p}.containerPort", minimum=1)
            if port.get("containerPort") is None:
                ctx.problem(f"{p}.containerPort", "required")
            elif number is not None and number > _MAX_PORT:
                ctx.problem(f"{p}.containerPort", f"must be between 1 and {_MAX_PORT}")
            host = ctx.int(port, "hostPort", f"{p}.hostPort", default=0, minimum=0) or 0
            if host > _MAX_PORT:
                ctx.problem(f"{p}.hostPort", f"must be between 0 and {_MAX_PORT}")
                host = 0
            protocol = ctx.str(port, "protocol", f"{p}.protocol") or "TCP"
            if protocol not in PROTOCOLS:
                ctx.problem(f"{p}.protocol", f"must be one of {', '.join(PROTOCOLS)}")
                host = 0
            host_ip = ctx.str(port, "hostIP", f"{p}.hostIP") or ""
            if host:
                out.append(ContainerHostPort(host, protocol, host_ip, container))
    return tuple(out)


def read_scheduling_gates(ctx: Context, spec: dict, path: str = "spec.schedulingGates") -> tuple:
    gates = []
    for p, gate in ctx.items(spec, "schedulingGates", path):
        name = ctx.str(gate, "name", f"{p}.name", required=True)
        if name:
            gates.append(name)
    return tuple(gates)


def read_conditions(ctx: Context, status: dict) -> tuple:
    out = []
    for p, c in ctx.items(status, "conditions", "status.conditions"):
        kind = ctx.str(c, "type", f"{p}.type", required=True)
        if kind is None:
            continue
        out.append(
            PodCondition(
                kind,
                ctx.str(c, "status", f"{p}.status") or "",
                ctx.str(c, "reason", f"{p}.reason") or "",
                ctx.str(c, "message", f"{p}.message") or "",
            )
        )
    return tuple(out)


def read_owner_references(md: dict) -> tuple:
    """``metadata.ownerReferences`` (their shape is checked with the rest of the metadata)."""
    refs = md.get("ownerReferences")
    out = []
    for ref in refs if isinstance(refs, list) else ():
        if not isinstance(ref, dict):
            continue
        kind, name = ref.get("kind"), ref.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            continue
        api_version = ref.get("apiVersion")
        uid = ref.get("uid")
        out.append(
            OwnerReference(
                kind,
                name,
                api_version if isinstance(api_version, str) else "",
                uid if isinstance(uid, str) else "",
                ref.get("controller") is True,
            )
        )
    return tuple(out)
