"""A local HTTP server answering the Kubernetes list endpoints with recorded JSON."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse

TOKEN = "import-test-token"

# What an EKS 1.34 control plane answers on GET /version (minor "34+", as EKS reports it).
EKS_1_34_VERSION = {
    "major": "1",
    "minor": "34+",
    "gitVersion": "v1.34.2-eks-113cf36",
    "gitCommit": "5c4a3a1e5f8f1a9c8e0b7c1d2e3f4a5b6c7d8e9f",
    "gitTreeState": "clean",
    "buildDate": "2025-11-20T04:21:32Z",
    "goVersion": "go1.24.9",
    "compiler": "gc",
    "platform": "linux/amd64",
}


def _status(code: int, reason: str, message: str) -> dict:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


class FakeApiServer:
    """``routes``: path -> list of items (paged by ``limit``), (code, Status) for errors, or an
    object answered as it is. ``/version`` answers ``EKS_1_34_VERSION`` unless routes say."""

    def __init__(self, routes: dict[str, list[dict] | tuple[int, dict] | dict]) -> None:
        self.routes = {"/version": EKS_1_34_VERSION, **routes}
        self.requests: list[str] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # keep test output quiet
                pass

            def do_GET(self):
                url = urlparse(self.path)
                outer.requests.append(self.path)
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._send(401, _status(401, "Unauthorized", "Unauthorized"))
                # The client asks for "/version/"; the API server answers with or without "/".
                route = outer.routes.get(url.path.rstrip("/") or "/")
                if route is None:
                    return self._send(
                        404, _status(404, "NotFound", f"the server could not find {url.path}")
                    )
                if isinstance(route, tuple):
                    return self._send(*route)
                if isinstance(route, dict):
                    return self._send(200, route)
                query = parse_qs(url.query)
                start = int(query.get("continue", ["0"])[0])
                limit = int(query.get("limit", [str(len(route) or 1)])[0])
                page = route[start : start + limit]
                meta = {"resourceVersion": "123456"}
                if start + limit < len(route):
                    meta["continue"] = str(start + limit)
                return self._send(
                    200, {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": page}
                )

            def _send(self, code: int, body: dict):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self, context: str = "kind-gpu") -> str:
        return (
            "apiVersion: v1\nkind: Config\n"
            f"clusters:\n- name: gpu\n  cluster:\n    server: {self.url}\n"
            f"users:\n- name: admin\n  user:\n    token: {TOKEN}\n"
            f"contexts:\n- name: {context}\n  context:\n    cluster: gpu\n    user: admin\n"
            f"current-context: {context}\n"
        )

    def __enter__(self) -> FakeApiServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


def recorded_routes(docs: list[dict]) -> dict:
    """Group snapshot documents into list responses, as the API server returns them."""
    paths = {
        "Namespace": "/api/v1/namespaces",
        "Node": "/api/v1/nodes",
        "Pod": "/api/v1/pods",
        "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
        "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
        "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims",
        "NodePool": "/apis/karpenter.sh/v1/nodepools",
    }
    routes: dict = {p: [] for p in paths.values()}
    for doc in docs:
        path = paths.get(doc["kind"])
        if path:
            item = {k: v for k, v in doc.items() if k not in ("kind", "apiVersion")}
            routes[path].append(item)
    return routes
