"""Karpenter pkg/scheduling/hostportusage_test.go, "HostPortUsage" / "entry type UT", title by
title, on allocator/scheduling/hostports.py. Every title is ported; none left out."""

from __future__ import annotations

from dataclasses import replace

from allocator.scheduling.hostports import HostPort

ENTRY = HostPort("10.0.0.0", 4443, "TCP")


def test_string_output():
    assert str(ENTRY) == "IP=10.0.0.0 Port=4443 Proto=TCP"


def test_identical_entries_match():
    e2 = replace(ENTRY)
    assert ENTRY.matches(e2)
    assert e2.matches(ENTRY)


def test_if_any_one_ip_has_an_unspecified_ipv4_or_ipv6_address_they_match():
    e2 = replace(ENTRY, ip="0.0.0.0")
    assert ENTRY.matches(e2)
    assert e2.matches(ENTRY)
    e2 = replace(ENTRY, ip="::")
    assert ENTRY.matches(e2)
    assert e2.matches(ENTRY)


def test_mismatched_protocols_dont_match():
    e2 = replace(ENTRY, protocol="SCTP")
    assert not ENTRY.matches(e2)
    assert not e2.matches(ENTRY)


def test_mismatched_ports_dont_match():
    e2 = replace(ENTRY, port=443)
    assert not ENTRY.matches(e2)
    assert not e2.matches(ENTRY)
