"""Host ports on one node, as Karpenter's ``HostPortUsage`` (``pkg/scheduling/hostportusage.go``)
tracks them: every (host IP, port, protocol) a pod binds must be unique on its node.

Two host ports collide when protocol and port are equal and their IPs are equal or either one
is the unspecified address (``0.0.0.0`` or ``::``); an empty ``hostIP`` means ``0.0.0.0``.
Only the ports of a pod's containers count (Karpenter's ``GetHostPorts`` reads no init
container). ``conflicts`` decides and changes nothing; ``add`` commits (Karpenter's CanAdd /
Add): a decision can be tried on a usage and thrown away.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

from allocator.model import Pod
from allocator.records import record

_UNSPECIFIED = "0.0.0.0"


@record(frozen=True)
class HostPort:
    """One (IP, port, protocol) a pod binds on its node."""

    ip: str  # as written, "" already read as 0.0.0.0
    port: int
    protocol: str

    @property
    def address(self) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
        return _parse_ip(self.ip)

    def matches(self, other: HostPort) -> bool:
        if self.protocol != other.protocol or self.port != other.port:
            return False
        mine, theirs = self.address, other.address
        if mine == theirs:
            return True  # equal IPs (two unparsable IPs compare equal, as Go's nil IPs do)
        return _unspecified(mine) or _unspecified(theirs)

    def __str__(self) -> str:
        address = self.address
        shown = "<nil>" if address is None else str(address)
        return f"IP={shown} Port={self.port} Proto={self.protocol}"


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        return None
    # An IPv4-mapped IPv6 address is the IPv4 address (Go's net.IP.Equal).
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def _unspecified(address: ipaddress.IPv4Address | ipaddress.IPv6Address | None) -> bool:
    return address is not None and address.is_unspecified


def host_ports(pod: Pod) -> tuple[HostPort, ...]:
    """The host ports a pod binds (Karpenter's GetHostPorts: containers only)."""
    return tuple(
        HostPort(p.host_ip or _UNSPECIFIED, p.host_port, p.protocol) for p in pod.host_ports
    )


@record(frozen=True)
class HostPortConflict:
    """Why a pod cannot join a node: its ``port`` collides with ``existing``, bound by
    ``holder`` (``namespace/name``)."""

    port: HostPort
    existing: HostPort
    holder: str

    def __str__(self) -> str:
        # Karpenter's words (the caller puts "checking host port usage, " before them), then
        # what collided and which pod holds the port.
        held = f"{self.existing} held by pod {self.holder}"
        if str(self.port) != str(self.existing):
            held = f"{self.port} collides with {held}"
        return f"pod hostport conflicts with existing hostport configuration ({held})"


class HostPortUsage:
    """The host ports bound on one node, by pod (``namespace/name``)."""

    __slots__ = ("_reserved",)

    def __init__(self, reserved: dict[str, tuple[HostPort, ...]] | None = None) -> None:
        self._reserved: dict[str, tuple[HostPort, ...]] = dict(reserved or {})

    def conflicts(self, pod: Pod, ports: Iterable[HostPort]) -> HostPortConflict | None:
        """The first of ``ports`` that collides with a port another pod holds; None when the
        pod can bind them all. A pod never collides with itself."""
        pod_key = pod.key
        for port in ports:
            for holder, held in self._reserved.items():
                if holder == pod_key:
                    continue
                for existing in held:
                    if port.matches(existing):
                        return HostPortConflict(port, existing, holder)
        return None

    def add(self, pod: Pod, ports: Iterable[HostPort]) -> None:
        """Record the pod's ports (replacing what it held before, as Karpenter's Add does)."""
        self._reserved[pod.key] = tuple(ports)

    def delete_pod(self, pod_key: str) -> None:
        self._reserved.pop(pod_key, None)

    def copy(self) -> HostPortUsage:
        return HostPortUsage(self._reserved)

    def holders(self) -> dict[str, tuple[HostPort, ...]]:
        """Pod -> the host ports it binds (pods binding none included)."""
        return dict(self._reserved)

    def __len__(self) -> int:
        return sum(len(ports) for ports in self._reserved.values())


def usage_of(pods: Iterable[Pod]) -> HostPortUsage:
    """The usage of a node running ``pods``."""
    usage = HostPortUsage()
    for pod in pods:
        ports = host_ports(pod)
        if ports:
            usage.add(pod, ports)
    return usage
