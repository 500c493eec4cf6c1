"""The user's kubeconfig as kubectl finds it: ``--kubeconfig``, else every file of
``$KUBECONFIG`` merged (the first file to set a cluster, user, context or the current context
wins, as kubectl merges them), else ``~/.kube/config``. File paths inside a kubeconfig are
relative to the file that names them."""

from __future__ import annotations

import os
from pathlib import Path

import yaml

_FILE_KEYS = {
    "clusters": ("cluster", ("certificate-authority",)),
    "users": ("user", ("client-certificate", "client-key", "tokenFile", "token-file")),
}


class KubeconfigError(Exception):
    pass


def kubeconfig_paths(explicit: str | None, environ: dict[str, str]) -> list[Path]:
    if explicit:
        return [Path(explicit).expanduser()]
    listed = environ.get("KUBECONFIG", "")
    if listed:
        return [Path(p).expanduser() for p in listed.split(os.pathsep) if p]
    return [Path(environ.get("HOME", "~")).expanduser() / ".kube" / "config"]


def _absolute(config: dict, base: Path) -> None:
    """Make the file paths of one kubeconfig absolute (relative to its own directory)."""
    for section, (inner, keys) in _FILE_KEYS.items():
        for entry in config.get(section) or []:
            body = (entry or {}).get(inner) if isinstance(entry, dict) else None
            if not isinstance(body, dict):
                continue
            for key in keys:
                value = body.get(key)
                if isinstance(value, str) and value and not os.path.isabs(value):
                    body[key] = str(base / value)


def load_kubeconfig(explicit: str | None, environ: dict[str, str]) -> dict:
    """The merged kubeconfig; KubeconfigError when no file exists or one is not YAML."""
    merged: dict = {"clusters": [], "users": [], "contexts": []}
    found = []
    for path in kubeconfig_paths(explicit, environ):
        if not path.is_file():
            if explicit:
                raise KubeconfigError(f"{path}: no such file")
            continue
        try:
            config = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        except (OSError, UnicodeDecodeError) as err:
            raise KubeconfigError(f"{path}: cannot read it: {err}") from None
        except yaml.YAMLError as err:
            raise KubeconfigError(f"{path}: not valid YAML: {err}") from None
        if not isinstance(config, dict):
            raise KubeconfigError(f"{path}: not a kubeconfig (expected a mapping)")
        found.append(path)
        _absolute(config, path.parent)
        for section in ("clusters", "users", "contexts"):
            names = {e.get("name") for e in merged[section] if isinstance(e, dict)}
            for entry in config.get(section) or []:
                if isinstance(entry, dict) and entry.get("name") not in names:
                    merged[section].append(entry)
        if not merged.get("current-context") and config.get("current-context"):
            merged["current-context"] = config["current-context"]
    if not found:
        tried = ", ".join(str(p) for p in kubeconfig_paths(explicit, environ))
        raise KubeconfigError(f"no kubeconfig found (tried {tried}); pass --kubeconfig FILE")
    if not merged["clusters"]:
        raise KubeconfigError(f"{', '.join(map(str, found))}: no clusters in the kubeconfig")
    return merged


def context_namespace(config: dict, context: str | None) -> str | None:
    """The namespace the context names (kubectl's default for ``-n``), if any."""
    name = context or config.get("current-context")
    for entry in config.get("contexts") or []:
        if isinstance(entry, dict) and entry.get("name") == name:
            namespace = (entry.get("context") or {}).get("namespace")
            return namespace if isinstance(namespace, str) and namespace else None
    return None
