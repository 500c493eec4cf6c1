"""Object names as the Kubernetes API server validates them (apimachinery's validation).

Most kinds take a DNS subdomain (``NameIsDNSSubdomain``: Pods, Nodes, every resource.k8s.io
kind, and custom resources such as NodePool and NodeClaim); Namespaces, and the namespace of
every namespaced object, a DNS label. An InstanceType's name becomes the value of the
``node.kubernetes.io/instance-type`` label, so it follows label values (cloud names such as
``Standard_NC24ads_A100_v4`` are valid there).
"""

from __future__ import annotations

import re

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?\Z")

DNS_LABEL = "dns-label"
DNS_SUBDOMAIN = "dns-subdomain"
LABEL_VALUE = "label-value"

NAME_RULES = {"Namespace": DNS_LABEL, "InstanceType": LABEL_VALUE}
"""Kinds whose name is not a DNS subdomain."""


def name_problem(name: str, rule: str, what: str) -> str | None:
    """Why ``name`` is not a valid name under ``rule``; None when it is."""
    if rule == DNS_LABEL:
        if len(name) <= 63 and _DNS_LABEL.match(name):
            return None
        return (
            f"invalid {what} {name!r}: must be a lowercase RFC 1123 label (lower case letters, "
            "digits and '-', starting and ending with a letter or digit, at most 63 characters)"
        )
    if rule == LABEL_VALUE:
        if name and len(name) <= 63 and _LABEL_VALUE.match(name):
            return None
        return (
            f"invalid {what} {name!r}: must be a valid label value (letters, digits, '-', '_' "
            "and '.', starting and ending with a letter or digit, at most 63 characters)"
        )
    if len(name) <= 253 and _DNS_SUBDOMAIN.match(name):
        return None
    return (
        f"invalid {what} {name!r}: must be a lowercase RFC 1123 subdomain (lower case letters, "
        "digits, '-' and '.', starting and ending with a letter or digit, at most 253 "
        "characters)"
    )


_QUALIFIED_NAME = re.compile(r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]\Z")


def label_key_problem(key: str) -> str | None:
    """Why ``key`` is not a valid label key (``IsQualifiedName``: an optional DNS subdomain
    prefix and '/', then a name of at most 63 characters); None when it is."""
    prefix, _, name = key.rpartition("/")
    bad = not name or len(name) > 63 or not _QUALIFIED_NAME.match(name)
    if "/" in key and (not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        bad = True
    if not bad:
        return None
    return (
        f"invalid label key {key!r}: must be a name of at most 63 characters (letters, digits, "
        "'-', '_' and '.', starting and ending with a letter or digit) with an optional DNS "
        "subdomain prefix and '/'"
    )


def label_value_problem(value: str) -> str | None:
    """Why ``value`` is not a valid label value (empty is valid); None when it is."""
    if len(value) <= 63 and _LABEL_VALUE.match(value):
        return None
    return (
        f"invalid label value {value!r}: must be at most 63 characters (letters, digits, '-', "
        "'_' and '.', starting and ending with a letter or digit), or empty"
    )


# --- extended resource names (k8s.io/kubernetes pkg/apis/core/v1/helper) ----------------------

_NATIVE_NAMESPACE = "kubernetes.io/"
_QUOTA_PREFIX = "requests."


def _qualified_name_problem(value: str) -> str | None:
    """apimachinery's IsQualifiedName: ``[prefix/]name``, prefix a DNS subdomain."""
    prefix, slash, name = value.rpartition("/")
    if slash and ("/" in prefix or not prefix):
        return "a qualified name must have at most one '/' and a non-empty prefix"
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "the name part must be at most 63 characters of alphanumerics, '-', '_' or '.', "
            "starting and ending with an alphanumeric"
        )
    if slash and (
        len(prefix) > 253 or not all(_DNS_LABEL.match(label) for label in prefix.split("."))
    ):
        return "the prefix must be a lowercase DNS subdomain"
    return None


def extended_resource_name_problem(name: str) -> str | None:
    """Why ``name`` is not a valid extended resource name (None when it is): it needs a domain
    prefix outside ``kubernetes.io/``, must not start with ``requests.``, and
    ``requests.<name>`` must be a qualified name (v1helper.IsExtendedResourceName)."""
    if "/" not in name:
        return "needs a domain prefix, as in example.com/gpu"
    if _NATIVE_NAMESPACE in name:
        return "the kubernetes.io/ domain is reserved for native resources"
    if name.startswith(_QUOTA_PREFIX):
        return "must not start with 'requests.'"
    return _qualified_name_problem(_QUOTA_PREFIX + name)
