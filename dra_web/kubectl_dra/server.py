"""``--open URL``: upload the snapshot to a dra-web server through its REST API
(``/api/snapshots/``, ``/api/runs/``), start a run of it, and give the link to the pod on
that run."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from dra_web.kubectl_dra.why import pod_anchor

TIMEOUT = 60

# (method, url, headers, body) -> (status, response body)
Transport = Callable[[str, str, dict[str, str], bytes | None], tuple[int, bytes]]


class ServerError(Exception):
    pass


def urllib_transport(
    method: str, url: str, headers: dict[str, str], body: bytes | None
) -> tuple[int, bytes]:
    request = urllib.request.Request(url, data=body, headers=headers, method=method)
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT) as response:  # noqa: S310
            return response.status, response.read()
    except urllib.error.HTTPError as err:
        return err.code, err.read()
    except (urllib.error.URLError, OSError) as err:
        reason = getattr(err, "reason", err)
        raise ServerError(f"cannot reach the dra-web server at {url}: {reason}") from None


@dataclass(frozen=True, slots=True)
class Opened:
    snapshot: int
    run: int
    link: str


def _multipart(files: Sequence[tuple[str, bytes]], fields: dict[str, str]) -> tuple[str, bytes]:
    boundary = f"kubectl-dra-{uuid.uuid4().hex}"
    parts: list[bytes] = []
    for name, value in fields.items():
        parts.append(
            f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        )
    for filename, content in files:
        parts.append(
            (
                f'--{boundary}\r\nContent-Disposition: form-data; name="file"; '
                f'filename="{filename}"\r\nContent-Type: application/octet-stream\r\n\r\n'
            ).encode()
            + content
            + b"\r\n"
        )
    parts.append(f"--{boundary}--\r\n".encode())
    return f"multipart/form-data; boundary={boundary}", b"".join(parts)


def _detail(status: int, body: bytes) -> str:
    try:
        detail = json.loads(body or b"{}").get("detail")
    except (ValueError, AttributeError):
        detail = None
    return f"HTTP {status}" + (f": {detail}" if detail else "")


def _json(status: int, body: bytes, what: str) -> dict:
    try:
        data = json.loads(body)
    except ValueError:
        raise ServerError(f"{what}: HTTP {status}, the answer is not JSON") from None
    if not isinstance(data, dict):
        raise ServerError(f"{what}: HTTP {status}, unexpected answer")
    return data


def base_url(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ServerError(f"--open: {url!r} is not an http(s) URL of a dra-web server")
    return url.rstrip("/") + "/"


def open_on_server(
    url: str,
    token: str,
    files: Sequence[tuple[str, bytes]],
    name: str,
    options: dict,
    pod: str,
    transport: Transport = urllib_transport,
) -> Opened:
    """Upload ``files`` as one snapshot, queue a run with ``options``, return the pod's link."""
    base = base_url(url)
    auth = {"Authorization": f"Token {token}", "Accept": "application/json"}
    content_type, body = _multipart(files, {"name": name})
    status, answer = transport(
        "POST", urljoin(base, "api/snapshots/"), {**auth, "Content-Type": content_type}, body
    )
    if status in (401, 403):
        raise ServerError(
            f"upload refused ({_detail(status, answer)}): check --token / DRA_WEB_TOKEN"
        )
    if status != 201:
        raise ServerError(f"upload refused: {_detail(status, answer)}")
    snapshot = _json(status, answer, "upload")["id"]
    payload = json.dumps({"snapshot": snapshot, "options": options}).encode()
    status, answer = transport(
        "POST", urljoin(base, "api/runs/"), {**auth, "Content-Type": "application/json"}, payload
    )
    if status not in (201, 202):
        raise ServerError(
            f"snapshot #{snapshot} stored, but the run was refused: {_detail(status, answer)}"
        )
    run = _json(status, answer, "run")["id"]
    return Opened(snapshot, run, urljoin(base, f"runs/{run}/") + "#" + pod_anchor(pod))
