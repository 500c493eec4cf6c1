"""A suggestion's change as something a user can apply: an RFC 6902 JSON patch that ``kubectl
patch --type json`` accepts, the object after it, and whether the object must be recreated.

A suggestion names its change as ``{object: "Kind ns/name", field: "spec.x[0].y", op: "set",
value}`` (allocator/suggestions/). Written as a merge patch, an empty value is a
no-op (``nodeSelector: {}`` removes nothing) and a list index has no form; here the field
becomes a JSON pointer with real indices and an empty or null value a real ``remove``.

Kubernetes refuses most changes to a pod's spec and every change to a ResourceClaim's or a
ResourceClaimTemplate's spec: such a patch is still the right edit, but of a manifest that is
recreated, and of the pod template of the workload that owns the pod. ``recreate`` says so and
``steps`` say how, naming that workload.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import field

import orjson

from allocator.records import record

NAMESPACED = frozenset({"Pod", "ResourceClaim", "ResourceClaimTemplate", "ReplicaSet"})

# Pod fields an update may change (Kubernetes ValidatePodUpdate): the rest of spec is immutable.
_POD_MUTABLE = (
    re.compile(r"^metadata\.(labels|annotations)(\.|$)"),
    re.compile(r"^spec\.(init)?[cC]ontainers\[\d+\]\.image$"),
    re.compile(r"^spec\.activeDeadlineSeconds$"),
    re.compile(r"^spec\.tolerations$"),  # additions only: checked on the values
    re.compile(r"^spec\.schedulingGates$"),  # removals only: checked on the values
)
_FIELD_PART = re.compile(r"^(?P<name>[^\[\]]*)(?P<indices>(\[\d+\])*)$")


class EditError(ValueError):
    """A change that cannot be written as a patch of the object it names (the message names
    the object and the field)."""


class PatchError(ValueError):
    """A JSON patch that does not apply to its object (the message names the operation)."""


@record(frozen=True)
class Edit:
    """One change as a user applies it."""

    object: str  # "Kind namespace/name" or "Kind name"
    patch: list[dict]  # RFC 6902, against the object as in the snapshot (or the previous edit)
    manifest: dict  # the object after the patch
    recreate: bool = False
    workload: str | None = None  # "Deployment ns/name": where a pod's change really goes
    steps: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        out: dict = {"patch": self.patch, "manifest": self.manifest, "recreate": self.recreate}
        if self.recreate:
            out["workload"] = self.workload
            out["recreateSteps"] = list(self.steps)
        return out


# --- naming objects -----------------------------------------------------------------------


def object_name(kind: str, raw: dict) -> str:
    """``Kind namespace/name`` for namespaced kinds (namespace defaulted), else ``Kind name``."""
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    name = str(meta.get("name") or "")
    if kind in NAMESPACED:
        return f"{kind} {meta.get('namespace') or 'default'}/{name}"
    return f"{kind} {name}"


@record
class ObjectIndex:
    """A snapshot's documents by object name (the first of a name wins, as the loader keeps
    it), and which pods use each claim or claim template (built on first use)."""

    objects: dict[str, tuple[str, dict]]
    _users: dict[tuple[str, str, str], list[str]] | None = None
    # The edits of changes against these documents (``edit_for``), by the change's content:
    # the failed replicas of one workload carry the same change (4,000 times one NodePool's
    # limits), and a workload-wide change's edit of each replica is asked by every replica.
    edits: dict[tuple, Edit] = field(default_factory=dict)

    def get(self, ref: str) -> tuple[str, dict] | None:
        return self.objects.get(ref)

    def users(self, kind: str, namespace: str, name: str) -> list[str]:
        """Pods whose ``spec.resourceClaims`` name this ResourceClaim or ResourceClaimTemplate."""
        if self._users is None:
            self._users = {}
            for ref, (k, raw) in self.objects.items():
                if k != "Pod":
                    continue
                ns = (raw.get("metadata") or {}).get("namespace") or "default"
                for c in (raw.get("spec") or {}).get("resourceClaims") or []:
                    if not isinstance(c, dict):
                        continue
                    if c.get("resourceClaimTemplateName"):
                        key = ("ResourceClaimTemplate", ns, str(c["resourceClaimTemplateName"]))
                        self._users.setdefault(key, []).append(ref)
                    if c.get("resourceClaimName"):
                        key = ("ResourceClaim", ns, str(c["resourceClaimName"]))
                        self._users.setdefault(key, []).append(ref)
        return list(self._users.get((kind, namespace, name), []))

    def replaced(self, ref: str, kind: str, raw: dict) -> ObjectIndex:
        """A copy with ``ref`` changed (the pod users are kept: an edit of a claim or template
        does not change which pods use it)."""
        return ObjectIndex({**self.objects, ref: (kind, raw)}, self._users)


def index_documents(documents: Iterable[tuple[str, dict]]) -> ObjectIndex:
    out: dict[str, tuple[str, dict]] = {}
    for kind, raw in documents:
        if isinstance(raw, dict):
            out.setdefault(object_name(kind, raw), (kind, raw))
    return ObjectIndex(out)


def split_object(ref: str) -> tuple[str, str | None, str]:
    """``Pod ns/name`` -> (``Pod``, ``ns``, ``name``); ``NodePool gpu`` -> (``NodePool``, None, ``gpu``)."""
    kind, _, rest = ref.partition(" ")
    namespace, slash, name = rest.partition("/")
    return (kind, namespace, name) if slash else (kind, None, rest)


# --- field paths and JSON pointers ----------------------------------------------------------


def field_steps(path: str) -> list[str | int]:
    """``spec.devices.requests[0].exactly.count`` -> ["spec", "devices", "requests", 0, ...]."""
    steps: list[str | int] = []
    if not path:
        raise EditError("empty field path")
    for part in path.split("."):
        m = _FIELD_PART.match(part)
        if m is None or (not m.group("name") and not m.group("indices")):
            raise EditError(f"field {path!r}: cannot read {part!r}")
        if m.group("name"):
            steps.append(m.group("name"))
        steps.extend(int(i) for i in re.findall(r"\[(\d+)\]", m.group("indices")))
    return steps


def pointer(steps: Sequence[str | int]) -> str:
    """RFC 6901: ``~`` as ``~0`` and ``/`` as ``~1`` (label keys like ``example.com/zone``)."""
    return "".join("/" + str(s).replace("~", "~0").replace("/", "~1") for s in steps)


def _empty(value) -> bool:
    return value is None or value == {} or value == []


def set_ops(doc: dict, steps: Sequence[str | int], value) -> list[dict]:
    """The operations that make ``doc`` hold ``value`` at ``steps``: ``replace`` where the field
    is, ``add`` of the missing part at the first missing step, ``remove`` for an empty value (a
    field absent and a field empty mean the same to Kubernetes), items appended to a list as
    ``add`` at their index."""
    node = doc
    for depth, step in enumerate(steps):
        last = depth == len(steps) - 1
        if not _has(node, step):
            if _empty(value):
                return []  # nothing there to remove
            if not isinstance(node, dict | list):
                raise EditError(
                    f"{pointer(steps[:depth])} is a {type(node).__name__}, not an object"
                )
            if isinstance(node, list) and not (isinstance(step, int) and step == len(node)):
                raise EditError(f"{pointer(steps[: depth + 1])}: no such list item")
            return [
                {
                    "op": "add",
                    "path": pointer(steps[: depth + 1]),
                    "value": _nest(steps[depth + 1 :], value),
                }
            ]
        if last:
            current = node[step]
            if _empty(value):
                return [{"op": "remove", "path": pointer(steps)}]
            if current == value:
                return []
            if (
                isinstance(current, list)
                and isinstance(value, list)
                and len(value) > len(current)
                and value[: len(current)] == current
            ):
                return [
                    {"op": "add", "path": pointer([*steps, i]), "value": copy.deepcopy(item)}
                    for i, item in enumerate(value[len(current) :], len(current))
                ]
            return _within(steps, current, value)
        node = node[step]
    raise EditError("empty field path")  # unreachable: steps is never empty


def _within(steps: Sequence[str | int], current, value) -> list[dict]:
    """The smallest edit inside a field whose value changes (a dropped nodeSelector key, one
    requirement of a list); a whole ``replace`` when the diff would need ``move`` or ``copy``
    (which ``kubectl patch`` takes too, but a reader follows less easily)."""
    whole = [{"op": "replace", "path": pointer(steps), "value": copy.deepcopy(value)}]
    if not (isinstance(current, dict | list) and type(current) is type(value)):
        return whole
    import jsonpatch  # only where a patch is made or applied (2 ms with difflib a process)

    ops = jsonpatch.make_patch(current, value).patch
    if not ops or any(op.get("op") not in ("add", "remove", "replace") for op in ops):
        return whole
    prefix = pointer(steps)
    out = [{**op, "path": prefix + op["path"]} for op in ops]
    return out if len(out) <= 3 else whole


def _nest(steps: Sequence[str | int], value):
    out = copy.deepcopy(value)
    for step in reversed(steps):
        if isinstance(step, int):
            if step != 0:
                raise EditError(f"cannot create list item [{step}] of a list that does not exist")
            out = [out]
        else:
            out = {step: out}
    return out


def apply_patch(doc: dict, patch: list[dict]) -> dict:
    """``doc`` after the RFC 6902 ``patch`` (a new object; ``doc`` is left untouched)."""
    if not isinstance(patch, list) or not all(isinstance(op, dict) for op in patch):
        raise PatchError("a JSON patch is a list of operations (objects with op and path)")
    import jsonpatch

    try:
        return jsonpatch.JsonPatch(patch).apply(copy.deepcopy(doc))
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        raise PatchError(str(exc)) from None
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise PatchError(f"operation not applicable: {exc}") from None


# --- immutability and the owning workload -----------------------------------------------------


def _pod_change_mutable(field_path: str, before, after) -> bool:
    if not any(p.match(field_path) for p in _POD_MUTABLE):
        return False
    if field_path == "spec.tolerations":  # an update may only add tolerations
        old = before if isinstance(before, list) else []
        new = after if isinstance(after, list) else []
        return all(t in new for t in old)
    if field_path == "spec.schedulingGates":  # and only remove scheduling gates
        old = before if isinstance(before, list) else []
        new = after if isinstance(after, list) else []
        return all(g in old for g in new)
    return True


def pod_workload(raw: dict, index: ObjectIndex) -> str | None:
    """The workload that recreates a pod: its controller, a ReplicaSet's Deployment (from the
    ReplicaSet in the snapshot, else its ``pod-template-hash`` name); a Job stays the Job (a
    CronJob's next Job takes the template change)."""
    meta = raw.get("metadata") if isinstance(raw.get("metadata"), dict) else {}
    ns = meta.get("namespace") or "default"
    owners = [o for o in meta.get("ownerReferences") or [] if isinstance(o, dict)]
    owner = next((o for o in owners if o.get("controller")), owners[0] if owners else None)
    if owner is None:
        return None
    kind, name = str(owner.get("kind") or ""), str(owner.get("name") or "")
    if kind == "ReplicaSet":
        stored = index.get(f"ReplicaSet {ns}/{name}")
        if stored is not None and stored[1] is not raw:
            rs_owner = pod_workload(stored[1], index)
            if rs_owner is not None:
                return rs_owner
        digest = (meta.get("labels") or {}).get("pod-template-hash")
        if digest and name.endswith(f"-{digest}"):
            return f"Deployment {ns}/{name[: -len(digest) - 1]}"
    return f"{kind} {ns}/{name}"


def _recreate_pod_steps(pod_ref: str, workload: str | None, patch: list[dict]) -> list[str]:
    _, ns, name = split_object(pod_ref)
    if workload is None:
        return [
            f"kubectl get pod -n {ns} {name} -o yaml > pod.yaml",
            "apply the patch to pod.yaml (or save the manifest shown as pod.yaml)",
            "kubectl replace --force -f pod.yaml  # deletes the pod and creates it again",
        ]
    wkind, wns, wname = split_object(workload)
    spec_ops = [
        {**op, "path": "/spec/template" + op["path"]}
        for op in patch
        if op["path"].startswith("/spec/") or op["path"].startswith("/metadata/")
    ]
    shown = json.dumps(spec_ops, separators=(",", ":"))
    lower = wkind.lower()
    if wkind == "Job":
        return [
            f"a Job's pod template is immutable: kubectl get job -n {wns} {wname} -o yaml > job.yaml",
            f"apply the patch under spec.template of job.yaml ({shown})",
            "kubectl replace --force -f job.yaml  # recreates the Job and its pods",
        ]
    steps = [
        f"kubectl patch {lower} -n {wns} {wname} --type json -p '{shown}'"
        "  # the same change in its pod template (check the indices against the template)",
    ]
    if wkind in ("Deployment", "ReplicaSet"):
        steps.append(f"the {wkind} replaces pod {ns}/{name} with one made from the new template")
    else:
        steps.append(
            f"kubectl delete pod -n {ns} {name}  # the {wkind} creates it again from the new template"
        )
    return steps


# Pods a claim's recreate steps name one by one; a template many pods use would otherwise make
# every failed pod's entry grow with its workload.
MAX_RECREATE_PODS = 5


def _recreate_claim_steps(
    ref: str, kind: str, users: list[str], workloads: list[str | None]
) -> list[str]:
    _, ns, name = split_object(ref)
    lower = kind.lower()
    steps = [
        f"save the manifest shown as {lower}.yaml (a {kind}'s spec cannot be changed in place)",
        f"kubectl delete {lower} -n {ns} {name} && kubectl create -f {lower}.yaml"
        "  # without metadata.uid, resourceVersion, creationTimestamp and status",
    ]
    for pod, workload in zip(users[:MAX_RECREATE_PODS], workloads, strict=False):
        _, pns, pname = split_object(pod)
        if workload is not None:
            steps.append(
                f"kubectl delete pod -n {pns} {pname}  # {workload} recreates it, "
                f"with a claim made from the new {kind}"
                if kind == "ResourceClaimTemplate"
                else f"kubectl delete pod -n {pns} {pname}  # {workload} recreates it"
            )
        else:
            steps.append(
                f"kubectl replace --force -f pod.yaml  # pod {pns}/{pname}, saved with "
                f"kubectl get pod -n {pns} {pname} -o yaml > pod.yaml"
            )
    if len(users) > MAX_RECREATE_PODS:
        steps.append(
            f"the same for the {len(users) - MAX_RECREATE_PODS} other pods that use it "
            f"(kubectl get pods -n {ns} -o wide lists them)"
        )
    return steps


# --- the entry points --------------------------------------------------------------------------


def edit_for(change: dict, index: ObjectIndex) -> Edit:
    """The edit of one ``set`` change against the indexed documents, worked out once per
    change alike (``ObjectIndex.edits``; an edit is read only). A Namespace the export left
    out is created (as ``kubectl label namespace`` would need it to exist: the patch is
    against an empty Namespace)."""
    key = _change_key(change)
    if key is None:
        return _edit_for(change, index)
    known = index.edits.get(key)
    if known is None:
        known = index.edits[key] = _edit_for(change, index)
    return known


def _change_key(change: dict) -> tuple | None:
    """What ``_edit_for`` reads of a change, comparable; None when its value has no JSON form
    orjson writes (worked out every time then)."""
    try:
        value = orjson.dumps(change.get("value"), option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        return None
    return (change.get("object"), change.get("field"), change.get("op", "set"), value)


def _edit_for(change: dict, index: ObjectIndex) -> Edit:
    ref = str(change.get("object") or "")
    field_path = str(change.get("field") or "")
    if change.get("op", "set") != "set":
        raise EditError(f"{ref}: op {change.get('op')!r} is no field edit")
    kind, ns, name = split_object(ref)
    stored = index.get(ref)
    if stored is None:
        if kind != "Namespace":
            raise EditError(f"{ref}: not in the snapshot")
        raw: dict = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    else:
        raw = stored[1]
    steps = field_steps(field_path)
    value = change.get("value")
    patch = set_ops(raw, steps, value)
    manifest = apply_patch(raw, patch)
    before = _read(raw, steps)
    recreate, workload, how = False, None, []
    if kind == "Pod" and not _pod_change_mutable(field_path, before, value):
        recreate = True
        workload = pod_workload(raw, index)
        how = _recreate_pod_steps(ref, workload, patch)
    elif kind in ("ResourceClaim", "ResourceClaimTemplate") and steps[0] == "spec":
        recreate = True
        users = index.users(kind, ns or "default", name)
        owners = [pod_workload(index.objects[u][1], index) for u in users]
        named = sorted({o for o in owners if o is not None})
        shown = ", ".join(named[:MAX_RECREATE_PODS])
        if len(named) > MAX_RECREATE_PODS:
            shown += f" and {len(named) - MAX_RECREATE_PODS} more"
        workload = shown if named else (users[0] if users else None)
        how = _recreate_claim_steps(ref, kind, users, owners)
    return Edit(ref, patch, manifest, recreate, workload, how)


def _has(node, step: str | int) -> bool:
    if isinstance(node, dict):
        return step in node
    return isinstance(node, list) and isinstance(step, int) and step < len(node)


def _read(doc, steps: Sequence[str | int]):
    node = doc
    for step in steps:
        if not _has(node, step):
            return None
        node = node[step]
    return node


def annotate(suggestion: dict, index: ObjectIndex) -> None:
    """Adds ``patch``, ``manifest``, ``recreate`` (and ``workload``, ``recreateSteps`` when it
    must be recreated) to a suggestion, and to each entry of its ``changes`` (applied in turn,
    so that two changes of one object build on each other). A ``delete`` change gets
    ``patch: null`` and ``manifest: null``: deleting is no patch. A change that cannot be
    written as a patch keeps the suggestion, with ``patch: null`` and ``patchError``."""
    changes = suggestion.get("changes")
    if isinstance(changes, list) and changes:
        working = index
        for entry in changes:
            if not isinstance(entry, dict):
                continue
            change = entry.get("change") if isinstance(entry.get("change"), dict) else entry
            edit = _annotate_one(entry, change, working)
            if edit is not None:  # the next change of the same object starts from this one
                working = working.replaced(edit.object, split_object(edit.object)[0], edit.manifest)
    change = suggestion.get("change")
    if isinstance(change, dict):
        _annotate_one(suggestion, change, index)


def _annotate_one(target: dict, change: dict, index: ObjectIndex) -> Edit | None:
    if change.get("op") == "delete":
        target.update({"patch": None, "manifest": None, "recreate": False})
        return None
    try:
        edit = edit_for(change, index)
        others = _other_objects(change)
        more = [edit_for({**change, "object": ref}, index) for ref in others]
    except (EditError, PatchError) as exc:
        target.update({"patch": None, "manifest": None, "recreate": False, "patchError": str(exc)})
        return None
    target.update(edit.to_json())
    if any(e.patch != edit.patch for e in more):
        # A workload-wide change (every replica's topology term) whose replicas differ (list
        # indices): each pod's own patch. Alike, ``patch`` is each one's (object_patches): a
        # replica's entry does not list its workload's patches again.
        target["patches"] = [{"object": e.object, "patch": e.patch} for e in [edit, *more]]
    return edit


def object_patches(entry: dict, change: dict) -> list[dict]:
    """``[{"object", "patch"}]`` of an annotated change (``entry`` the suggestion or one of its
    ``changes``): its ``patches`` when the objects' patches differ, else ``patch`` for each of
    ``change.objects`` (a workload-wide change) or for ``change.object``."""
    each = entry.get("patches")
    if isinstance(each, list):
        return [e for e in each if isinstance(e, dict)]
    objects = change.get("objects")
    if not isinstance(objects, list) or not objects:
        objects = [change.get("object")]
    return [{"object": o, "patch": entry.get("patch")} for o in objects]


def _other_objects(change: dict) -> list[str]:
    """The objects of a ``set`` change besides ``change.object`` (``objects`` of a
    workload-wide change), in their order."""
    objects = change.get("objects")
    if not isinstance(objects, list):
        return []
    main = change.get("object")
    return [o for o in objects if isinstance(o, str) and o != main]


def annotate_all(
    suggestions_by_pod: Iterable[list[dict]], documents: Iterable[tuple[str, dict]]
) -> None:
    """Every suggestion of every pod, against one index of the snapshot's documents."""
    index = index_documents(documents)
    for suggestions in suggestions_by_pod:
        for suggestion in suggestions:
            if isinstance(suggestion, dict):
                annotate(suggestion, index)


def _release(claim: dict, pod_ref: str) -> None:
    """What the resourceclaim controller does when a pod goes: it leaves ``reservedFor``, and
    a claim nobody reserves any more is deallocated."""
    status = claim.get("status")
    if not isinstance(status, dict) or not isinstance(status.get("reservedFor"), list):
        return
    ns = (claim.get("metadata") or {}).get("namespace") or "default"
    before = status["reservedFor"]
    kept = [
        r
        for r in before
        if not (
            isinstance(r, dict)
            and r.get("resource") == "pods"
            and f"Pod {ns}/{r.get('name')}" == pod_ref
        )
    ]
    if len(kept) == len(before):
        return
    status["reservedFor"] = kept
    if not kept:
        status.pop("allocation", None)
        status.pop("reservedFor", None)


def apply_edits(
    documents: Sequence[tuple[str, dict]], edits: Sequence[dict]
) -> list[tuple[str, dict]]:
    """The documents after a what-if's edits, each ``{"object": "Kind ns/name", "patch": [...]}``
    or ``{"object": ..., "delete": true}``, in order. Raises EditError naming the edit (by its
    position and object) that does not apply."""
    out = [(kind, copy.deepcopy(raw)) for kind, raw in documents]
    for n, edit in enumerate(edits):
        where = f"edits[{n}]"
        if not isinstance(edit, dict) or not isinstance(edit.get("object"), str):
            raise EditError(f"{where}: an edit is an object with 'object' (\"Kind ns/name\")")
        ref = edit["object"]
        kind = split_object(ref)[0]
        positions = [i for i, (k, raw) in enumerate(out) if object_name(k, raw) == ref]
        if edit.get("delete") is True:
            if not positions:
                raise EditError(f"{where} ({ref}): not in the snapshot")
            out = [d for i, d in enumerate(out) if i not in positions]
            if kind == "Pod":
                for k, raw in out:
                    if k == "ResourceClaim":
                        _release(raw, ref)
            continue
        patch = edit.get("patch")
        if not isinstance(patch, list):
            raise EditError(f"{where} ({ref}): 'patch' must be a list of RFC 6902 operations")
        if positions:
            base = out[positions[0]][1]
        elif kind == "Namespace":
            base = {
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {"name": split_object(ref)[2]},
            }
        else:
            raise EditError(f"{where} ({ref}): not in the snapshot")
        try:
            changed = apply_patch(base, patch)
        except PatchError as exc:
            raise EditError(f"{where} ({ref}): patch does not apply: {exc}") from None
        if not isinstance(changed, dict) or object_name(kind, changed) != ref:
            raise EditError(
                f"{where} ({ref}): a patch may not rename the object or change its kind"
            )
        if changed.get("kind", kind) != kind:
            raise EditError(f"{where} ({ref}): a patch may not change the object's kind")
        if positions:
            out[positions[0]] = (kind, changed)
        else:
            out.insert(0, (kind, changed))
    return out


def patch_between(before: dict, after: dict) -> list[dict]:
    """The RFC 6902 patch that turns ``before`` into ``after`` (an object edited as a whole,
    e.g. as YAML on the snapshot page)."""
    if not isinstance(after, dict):
        raise EditError("the edited object must be a mapping (a Kubernetes object)")
    import jsonpatch

    return jsonpatch.make_patch(before, after).patch
