"""Host port usage on a node (allocator/scheduling/hostports.py): which ports collide, who
holds them, and that deciding changes nothing until the pod is added."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from allocator.model import ContainerHostPort, Pod
from allocator.scheduling.hostports import HostPort, HostPortUsage, host_ports, usage_of


def vllm(name: str, port: int = 8000, *, host_ip: str = "", protocol: str = "TCP") -> Pod:
    """A vLLM server binding its OpenAI API port on the host."""
    return Pod(
        namespace="inference",
        name=name,
        uid=f"uid-{name}",
        host_ports=(ContainerHostPort(port, protocol, host_ip, "vllm"),),
    )


def test_an_empty_host_ip_binds_every_address():
    (port,) = host_ports(vllm("vllm-0"))
    assert port == HostPort("0.0.0.0", 8000, "TCP")
    assert str(port) == "IP=0.0.0.0 Port=8000 Proto=TCP"


def test_init_container_ports_are_not_counted():
    pod = Pod(
        namespace="inference",
        name="vllm-0",
        uid="u",
        init_host_ports=(ContainerHostPort(9000, "TCP", "", "model-download"),),
    )
    assert host_ports(pod) == ()


def test_a_second_vllm_replica_conflicts_with_the_first_and_names_it():
    usage = usage_of([vllm("vllm-0")])
    conflict = usage.conflicts(vllm("vllm-1"), host_ports(vllm("vllm-1")))
    assert conflict is not None
    assert conflict.holder == "inference/vllm-0"
    assert str(conflict) == (
        "pod hostport conflicts with existing hostport configuration "
        "(IP=0.0.0.0 Port=8000 Proto=TCP held by pod inference/vllm-0)"
    )
    specific = usage.conflicts(vllm("vllm-2"), host_ports(vllm("vllm-2", host_ip="10.0.1.17")))
    assert str(specific) == (
        "pod hostport conflicts with existing hostport configuration (IP=10.0.1.17 Port=8000 "
        "Proto=TCP collides with IP=0.0.0.0 Port=8000 Proto=TCP held by pod inference/vllm-0)"
    )


def test_a_pod_never_conflicts_with_itself():
    usage = usage_of([vllm("vllm-0")])
    assert usage.conflicts(vllm("vllm-0"), host_ports(vllm("vllm-0"))) is None


def test_other_ports_protocols_and_specific_addresses_coexist():
    usage = usage_of([vllm("vllm-0", host_ip="10.0.1.17")])

    def conflict(pod: Pod):
        return usage.conflicts(pod, host_ports(pod))

    assert conflict(vllm("metrics", 9400)) is None
    assert conflict(vllm("dns", 8000, protocol="UDP")) is None
    assert conflict(vllm("vllm-1", host_ip="10.0.1.18")) is None
    # 0.0.0.0 and :: collide with any address.
    assert conflict(vllm("vllm-2")) is not None
    assert conflict(vllm("vllm-3", host_ip="::")) is not None


def test_an_ipv4_mapped_ipv6_address_is_the_ipv4_address():
    a = HostPort("10.0.1.17", 8000, "TCP")
    b = HostPort("::ffff:10.0.1.17", 8000, "TCP")
    assert a.matches(b) and b.matches(a)


def test_deciding_does_not_add_and_adding_commits():
    usage = HostPortUsage()
    first, second = vllm("vllm-0"), vllm("vllm-1")
    ports = host_ports(first)
    assert usage.conflicts(first, ports) is None
    assert usage.conflicts(second, ports) is None  # nothing was recorded
    trial = usage.copy()
    trial.add(first, ports)
    assert usage.conflicts(second, ports) is None  # the copy took it, not usage
    assert trial.conflicts(second, ports) is not None
    trial.delete_pod(first.key)
    assert trial.conflicts(second, ports) is None


ips = st.sampled_from(["", "0.0.0.0", "::", "10.0.1.17", "10.0.1.18", "fd00::1", "bogus"])
ports = st.builds(
    HostPort,
    ips.map(lambda ip: ip or "0.0.0.0"),
    st.sampled_from([8000, 8001]),
    st.sampled_from(["TCP", "UDP", "SCTP"]),
)


@given(ports, ports)
def test_matching_is_symmetric_and_needs_equal_port_and_protocol(a: HostPort, b: HostPort):
    assert a.matches(b) == b.matches(a)
    if a.matches(b):
        assert a.port == b.port and a.protocol == b.protocol
    if a.port == b.port and a.protocol == b.protocol and "0.0.0.0" in (a.ip, b.ip):
        assert a.matches(b)
