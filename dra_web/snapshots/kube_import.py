"""Live import: list every snapshot kind (docs/SNAPSHOT.md) from a cluster, raw JSON kept.

Responses are read with ``_preload_content=False`` and json-decoded here: the client's typed
models would drop the fields they do not know, and clusters run newer APIs than any client.
A kind that cannot be read (404: API or CRD not installed, 403: not allowed) becomes a
warning, never a failure; only a cluster that answers nothing at all fails the import.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.config.config_exception import ConfigException

from allocator.catalog import aws as aws_catalog
from allocator.catalog.pairing import pair_with_cluster
from allocator.catalog.render import to_yaml

PAGE_LIMIT = 500
REQUEST_TIMEOUT = (10, 60)  # connect, read seconds


class KubeImportError(Exception):
    pass


@dataclass(frozen=True, slots=True)
class KindSource:
    kind: str
    group: str  # "" for core/v1
    versions: tuple[str, ...]  # tried in order; a 404 falls through to the next
    plural: str


# Every kind of docs/SNAPSHOT.md that a cluster can list (InstanceType cannot).
KIND_SOURCES: tuple[KindSource, ...] = (
    KindSource("Namespace", "", ("v1",), "namespaces"),
    KindSource("Node", "", ("v1",), "nodes"),
    KindSource("Pod", "", ("v1",), "pods"),
    KindSource("ResourceSlice", "resource.k8s.io", ("v1", "v1beta2", "v1beta1"), "resourceslices"),
    KindSource("DeviceClass", "resource.k8s.io", ("v1", "v1beta2", "v1beta1"), "deviceclasses"),
    KindSource("ResourceClaim", "resource.k8s.io", ("v1", "v1beta2", "v1beta1"), "resourceclaims"),
    KindSource(
        "ResourceClaimTemplate",
        "resource.k8s.io",
        ("v1", "v1beta2", "v1beta1"),
        "resourceclaimtemplates",
    ),
    KindSource(
        "DeviceTaintRule", "resource.k8s.io", ("v1", "v1beta2", "v1alpha3"), "devicetaintrules"
    ),
    KindSource("NodePool", "karpenter.sh", ("v1",), "nodepools"),
    KindSource("NodeClaim", "karpenter.sh", ("v1",), "nodeclaims"),
    KindSource("PersistentVolumeClaim", "", ("v1",), "persistentvolumeclaims"),
    KindSource("PersistentVolume", "", ("v1",), "persistentvolumes"),
    KindSource("StorageClass", "storage.k8s.io", ("v1",), "storageclasses"),
    KindSource("CSINode", "storage.k8s.io", ("v1",), "csinodes"),
    KindSource("DaemonSet", "apps", ("v1",), "daemonsets"),
)

# Kubeconfig fields that make the client run a program or read a server-side file: refused
# when the kubeconfig comes over the API (allowed from the command line).
_EXEC_FIELDS = ("exec", "auth-provider")
_FILE_FIELDS = ("client-certificate", "client-key", "tokenFile", "token-file")
_CLUSTER_FILE_FIELDS = ("certificate-authority",)


@dataclass(slots=True)
class ClusterListing:
    context: str
    server: str
    items: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    # The server's /version gitVersion ("v1.34.2-eks-113cf36"); "" when it did not answer.
    server_version: str = ""

    @property
    def file_name(self) -> str:
        return f"cluster-{self.context or 'default'}.json"

    def as_json_bytes(self) -> bytes:
        return json.dumps({"apiVersion": "v1", "kind": "List", "items": self.items}).encode()


def parse_kubeconfig(kubeconfig: str | bytes | dict) -> dict:
    if isinstance(kubeconfig, dict):
        return kubeconfig
    try:
        data = yaml.safe_load(kubeconfig)
    except yaml.YAMLError as exc:
        raise KubeImportError(f"kubeconfig: not valid YAML: {exc}") from None
    if not isinstance(data, dict) or not data.get("clusters"):
        raise KubeImportError("kubeconfig: expected a kubeconfig with clusters, users, contexts")
    return data


def check_remote_safe(cfg: dict) -> None:
    """Refuse kubeconfigs that would run programs or read files on this server."""
    for entry in cfg.get("users") or []:
        user = (entry or {}).get("user") or {}
        name = (entry or {}).get("name", "?")
        for key in _EXEC_FIELDS:
            if user.get(key):
                raise KubeImportError(
                    f"kubeconfig: users[{name}].user.{key}: credential plugins are not allowed "
                    "in an uploaded kubeconfig; use a token or inline client certificate data"
                )
        for key in _FILE_FIELDS:
            if user.get(key):
                raise KubeImportError(
                    f"kubeconfig: users[{name}].user.{key}: file paths are not allowed in an "
                    f"uploaded kubeconfig; use {key.split('-')[0]}-...-data fields"
                )
    for entry in cfg.get("clusters") or []:
        cluster = (entry or {}).get("cluster") or {}
        for key in _CLUSTER_FILE_FIELDS:
            if cluster.get(key):
                raise KubeImportError(
                    f"kubeconfig: clusters[{(entry or {}).get('name', '?')}].cluster.{key}: file "
                    "paths are not allowed in an uploaded kubeconfig; use certificate-authority-data"
                )


def api_client_for(cfg: dict, context: str | None) -> tuple[client.ApiClient, str, str]:
    try:
        api = config.new_client_from_config_dict(cfg, context=context, persist_config=False)
    except ConfigException as exc:
        raise KubeImportError(f"kubeconfig: {exc}") from None
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise KubeImportError(f"kubeconfig: cannot use it: {exc}") from None
    ctx = context or cfg.get("current-context") or ""
    api.configuration.retries = 0
    return api, ctx, api.configuration.host


def _list_pages(api: client.ApiClient, source: KindSource, version: str) -> list[dict]:
    items: list[dict] = []
    token: str | None = None
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    api_version = f"{source.group}/{version}" if source.group else version
    while True:
        kwargs: dict[str, Any] = {
            "limit": PAGE_LIMIT,
            "_preload_content": False,
            "_request_timeout": REQUEST_TIMEOUT,
        }
        if token:
            kwargs["_continue"] = token
        if source.kind == "Namespace":
            resp = core.list_namespace(**kwargs)
        elif source.kind == "Node":
            resp = core.list_node(**kwargs)
        elif source.kind == "Pod":
            resp = core.list_pod_for_all_namespaces(**kwargs)
        else:
            resp = custom.list_cluster_custom_object(source.group, version, source.plural, **kwargs)
        try:
            body = json.loads(resp.data)
        except ValueError:
            raise KubeImportError(
                f"{source.kind}: the server's answer to {api_version} {source.plural} is not JSON"
            ) from None
        for item in body.get("items") or []:
            if isinstance(item, dict):
                # List responses omit each item's kind and apiVersion.
                item.setdefault("apiVersion", api_version)
                item.setdefault("kind", source.kind)
                items.append(item)
        token = (body.get("metadata") or {}).get("continue")
        if not token:
            return items


def _describe(exc: ApiException) -> str:
    try:
        message = json.loads(exc.body or b"{}").get("message")
    except (ValueError, AttributeError):
        message = None
    return message or (exc.reason or "").strip() or f"HTTP {exc.status}"


def _server_version(api: client.ApiClient, warnings: list[str]) -> str:
    """The API server's version (``GET /version``), so that runs of the snapshot use that
    release's feature gate defaults; a server that does not say is a warning."""
    try:
        resp = client.VersionApi(api).get_code(
            _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        body = json.loads(resp.data)
    except Exception as exc:  # 403, 404, not JSON, a dropped connection: the import goes on
        detail = _describe(exc) if isinstance(exc, ApiException) else type(exc).__name__
        warnings.append(
            f"server version: GET /version failed ({detail}); runs use every feature gate "
            "unless a Kubernetes version is chosen"
        )
        return ""
    git_version = body.get("gitVersion") if isinstance(body, dict) else None
    if isinstance(git_version, str) and git_version:
        return git_version
    major, minor = (body.get(k) if isinstance(body, dict) else None for k in ("major", "minor"))
    return f"v{major}.{minor}" if isinstance(major, str) and isinstance(minor, str) else ""


def list_cluster(
    kubeconfig: str | bytes | dict, *, context: str | None = None, allow_local_files: bool = False
) -> ClusterListing:
    cfg = parse_kubeconfig(kubeconfig)
    if not allow_local_files:
        check_remote_safe(cfg)
    api, ctx, server = api_client_for(cfg, context)
    listing = ClusterListing(context=ctx, server=server)
    unreachable: list[str] = []
    try:
        for source in KIND_SOURCES:
            reasons: list[str] = []
            for version in source.versions:
                api_version = f"{source.group}/{version}" if source.group else version
                try:
                    items = _list_pages(api, source, version)
                except ApiException as exc:
                    if exc.status == 404:
                        reasons.append(f"{api_version} {source.plural}: 404 not found")
                        continue
                    if exc.status in (401, 403):
                        listing.warnings.append(
                            f"{source.kind}: {exc.status} forbidden: cannot list "
                            f"{api_version} {source.plural} ({_describe(exc)}); imported without "
                            f"{source.kind} objects"
                        )
                    else:
                        listing.warnings.append(
                            f"{source.kind}: HTTP {exc.status} listing {api_version} "
                            f"{source.plural}: {_describe(exc)}; imported without them"
                        )
                    break
                except KubeImportError as exc:
                    listing.warnings.append(str(exc))
                    break
                except Exception as exc:  # connection refused, TLS, timeout
                    unreachable.append(f"{source.kind}: {type(exc).__name__}: {exc}")
                    break
                listing.items.extend(items)
                listing.counts[source.kind] = len(items)
                break
            else:
                listing.warnings.append(
                    f"{source.kind}: not served by the cluster ({'; '.join(reasons)}): the API "
                    "or CRD is not installed; imported without "
                    f"{source.kind} objects"
                )
            if len(unreachable) == len(KIND_SOURCES) or (
                unreachable and not listing.counts and source is KIND_SOURCES[0]
            ):
                raise KubeImportError(f"cannot reach the cluster at {server}: {unreachable[-1]}")
        listing.server_version = _server_version(api, listing.warnings)
    finally:
        api.close()
    listing.warnings.extend(f"{u}; imported without them" for u in unreachable)
    return listing


@dataclass(slots=True)
class CatalogFile:
    """The catalog instance types a listing needs, as one file of the snapshot (None when no
    catalog applies), and what was decided, in words."""

    file: tuple[str, bytes] | None
    notes: list[str]
    region: str | None = None


def catalog_for(
    listing: ClusterListing, *, region: str | None = None, mig: bool | None = None
) -> CatalogFile:
    """Pair the cluster's nodes and NodePools with the AWS catalog (``allocator.catalog.
    pairing``): the instance types its NodePools allow and its nodes' families."""
    pairing = pair_with_cluster(listing.items, region=region, mig=mig)
    if not pairing.instance_types:
        return CatalogFile(None, pairing.notes, pairing.region)
    header = aws_catalog.yaml_header(pairing.region or "", len(pairing.instance_types))
    text = to_yaml(pairing.instance_types, header)
    name = f"catalog-aws-{pairing.region}.yaml"
    return CatalogFile((name, text.encode("utf-8")), pairing.notes, pairing.region)
