"""apps/v1 DaemonSet: the pod its controller would create on a new node (Karpenter's
PodForDaemonSet), read from ``spec.template`` with the Pod reader, problems named under
``spec.template``."""

from __future__ import annotations

from allocator.model import DaemonSet
from allocator.snapshot.core import build_pod
from allocator.snapshot.fields import Context


class _TemplateContext(Context):
    """The template read as a Pod: its paths are the DaemonSet's ``spec.template.*``."""

    __slots__ = ()

    def problem(self, path: str, message: str) -> None:
        super().problem(f"spec.template.{path}", message)


def build_daemon_set(ctx: Context, obj: dict) -> DaemonSet:
    md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    spec = ctx.map(obj, "spec", "spec", required=True)
    template = ctx.map(spec, "template", "spec.template", required=bool(spec))
    pod = None
    if template:
        tmd = ctx.map(template, "metadata", "spec.template.metadata")
        inner = _TemplateContext(
            ctx.file, ctx.index, ctx.kind, ctx.namespace, ctx.name, ctx.problems
        )
        tspec = template.get("spec")
        as_pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**tmd, "name": ctx.name or "", "namespace": ctx.namespace or "default"},
            "spec": tspec,
        }
        pod = build_pod(inner, as_pod)
    uid = md.get("uid")
    return DaemonSet(
        namespace=ctx.namespace or "default",
        name=ctx.name or "",
        uid=uid if isinstance(uid, str) else "",
        template=pod,
        raw=obj,
    )
