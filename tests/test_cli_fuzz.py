"""Fuzzing the CLI with mutated real snapshots.

The example snapshots (``examples/``, ``tests/fixtures/snapshots/``) are mutated structurally
(wrong types, huge numbers, deep nesting, removed and duplicated fields and objects, odd names,
unicode and NUL, YAML aliases) and as text, then given to ``validate`` or ``simulate``. Every
case must end with exit 0 or 2 within seconds: never a traceback, never exit 1 ("internal
error"). A few hundred cases run in-process in ``make test``; ``make fuzz`` runs thousands
(``FUZZ_EXAMPLES``, random seeds instead of the suite's fixed ones).
"""

from __future__ import annotations

import copy
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from allocator import cli

ROOT = Path(__file__).resolve().parent.parent
SEEDS = sorted(
    [*ROOT.glob("examples/*.yaml"), *ROOT.glob("tests/fixtures/snapshots/*.yaml")]
    + [*ROOT.glob("tests/fixtures/snapshots/*.json")]
)
FUZZ_EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "0"))
EXAMPLES = FUZZ_EXAMPLES or 300
SECONDS_PER_CASE = 20.0  # generous: the machine is shared; a hang is what this catches


def _seed_docs(path: Path) -> list:
    text = path.read_text()
    if path.suffix == ".json":
        data = json.loads(text)
        return data if isinstance(data, list) else [data]
    return [d for d in yaml.safe_load_all(text) if d is not None]


SEED_DOCS = {path.name: _seed_docs(path) for path in SEEDS}

ODD_NAMES = [
    "a/b",
    "",
    "UPPER",
    "x" * 300,
    "gpu-0\x00",
    "ünïcødé",
    "\ud800",
    "..",
    "-lead",
    "a b",
    "🚀",
    "train-0%2F..",
]
HOSTILE_SCALARS = [
    10**200,  # 5,000-digit integers come from the text mutations
    -(10**30),
    2**63,
    1e308,
    float("nan"),
    "1e99999999",
    "1e-99999999",
    "9" * 5000,
    "-1",
    "1.5Gi",
    "0.000000001n",
    "",
    "x" * 5000,
    True,
    None,
    0,
    -1,
    3.5,
    "yes",
    "0755",
    "\x00",
    "\ud800",
    [],
    {},
    [1, "a", None],
    {"a": {"b": [1]}},
]


def _deep_text(depth: int) -> str:
    """Nesting written as flow text (valid in JSON and YAML); serialisers would recurse."""
    return (
        '{"a": ' * (depth // 2)
        + "[" * (depth - depth // 2)
        + "1"
        + "]" * (depth - depth // 2)
        + "}" * (depth // 2)
    )


def _paths(value: object, prefix: tuple = ()) -> list[tuple]:
    """Every path into the document (keys and list indexes), the root excluded."""
    out = []
    if isinstance(value, dict):
        for k, v in value.items():
            out.append((*prefix, k))
            out.extend(_paths(v, (*prefix, k)))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out.append((*prefix, i))
            out.extend(_paths(v, (*prefix, i)))
    return out


def _parent(doc: object, path: tuple) -> object:
    for step in path[:-1]:
        doc = doc[step]
    return doc


@st.composite
def mutated_snapshot(draw) -> tuple[str, bytes]:
    seed = draw(st.sampled_from(sorted(SEED_DOCS)))
    docs = copy.deepcopy(SEED_DOCS[seed])
    # Mostly one mutation, so that many cases still load and reach the simulation.
    for _ in range(draw(st.sampled_from([1, 1, 1, 2, 3, 4]))):
        index = draw(st.integers(0, len(docs) - 1))
        doc = docs[index]
        op = draw(
            st.sampled_from(
                ["replace", "replace", "delete", "duplicate-item", "duplicate-doc", "name", "deep"]
                + ["rename", "drop-doc"]
                + ["tweak"] * 6
            )
        )
        paths = _paths(doc)
        if op == "duplicate-doc":
            docs.insert(index, copy.deepcopy(doc))
            continue
        if op == "drop-doc" and len(docs) > 1:
            docs.pop(index)
            continue
        if op == "name" and isinstance(doc, dict):
            md = doc.setdefault("metadata", {}) if isinstance(doc.get("metadata"), dict) else doc
            key = draw(st.sampled_from(["name", "namespace", "generateName"]))
            md[key] = draw(st.sampled_from(ODD_NAMES))
            continue
        if not paths:
            continue
        path = draw(st.sampled_from(paths))
        parent = _parent(doc, path)
        key = path[-1]
        if op == "tweak":
            # A plausible value of the same type: the document usually stays valid.
            parent[key] = _tweak(draw, parent[key])
        elif op in ("replace", "name"):
            parent[key] = copy.deepcopy(draw(st.sampled_from(HOSTILE_SCALARS)))
        elif op == "deep":
            parent[key] = f"__DEEP_{draw(st.sampled_from([30, 99, 101, 500, 3000]))}__"
        elif op == "delete":
            del parent[key]
        elif op == "duplicate-item" and isinstance(parent, list):
            parent.insert(key, copy.deepcopy(parent[key]))
        elif op == "rename" and isinstance(parent, dict) and isinstance(key, str):
            value = parent.pop(key)
            parent[draw(st.sampled_from([key.upper(), key.lower(), key + "x", ""]))] = value
    encoding = draw(st.sampled_from(["yaml", "yaml", "json"]))
    if encoding == "json":
        text = json.dumps(docs, ensure_ascii=draw(st.booleans()))
        name = "fuzz.json"
    else:
        text = yaml.safe_dump_all(docs, sort_keys=False, allow_unicode=draw(st.booleans()))
        name = "fuzz.yaml"
    for depth in (30, 99, 101, 500, 3000):
        for quote in ('"', "'", ""):
            text = text.replace(f"{quote}__DEEP_{depth}__{quote}", _deep_text(depth))
    text = _text_mutation(draw, text, encoding)
    return name, text.encode("utf-8", "surrogatepass")


def _tweak(draw, value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return draw(st.sampled_from([0, 1, 2, 3, 7, 8, 64, 1000, -1]))
    if isinstance(value, float):
        return draw(st.sampled_from([0.0, 0.5, 3.25, 100.0]))
    if isinstance(value, str):
        return draw(
            st.sampled_from(
                ["0", "1", "2", "100m", "80Gi", "1.5", "gpu-0", "us-west-2b", "Exists", "In"]
                + ["ExactCount", "All", "NoSchedule", value + "-x", value.upper()]
            )
        )
    if isinstance(value, list) and value:
        return value[: draw(st.integers(0, len(value) - 1))]
    return value


BOMB = 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
    f"{c}: &{c} [{','.join([f'*{p}'] * 9)}]\n" for p, c in zip("abcdefgh", "bcdefghi", strict=True)
)


def _text_mutation(draw, text: str, encoding: str) -> str:
    op = draw(st.sampled_from(["none"] * 10 + ["truncate", "bomb", "bigint", "nul", "tab"]))
    if op == "truncate" and text:
        return text[: draw(st.integers(0, len(text) - 1))]
    if op == "bomb" and encoding == "yaml":
        return text + "\n---\n" + BOMB
    if op == "bigint":
        at = draw(st.integers(0, len(text)))
        return text[:at] + "9" * 5000 + text[at:]
    if op == "nul":
        at = draw(st.integers(0, len(text)))
        return text[:at] + "\x00" + text[at:]
    if op == "tab" and encoding == "yaml":
        return text.replace("  ", "\t", 1)
    return text


def _too_slow(signum, frame):
    raise AssertionError(f"a fuzz case ran past {SECONDS_PER_CASE * 3:.0f}s")


def _run(argv: list[str]) -> tuple[int, str, str, float]:
    out, err = io.StringIO(), io.StringIO()
    started = time.monotonic()
    # DRA_WEB_DEBUG makes an internal error raise, so hypothesis shows its traceback.
    previous = os.environ.get("DRA_WEB_DEBUG")
    os.environ["DRA_WEB_DEBUG"] = "1"
    # A hang in Python code becomes a failure instead of a stuck suite.
    signal.signal(signal.SIGALRM, _too_slow)
    signal.alarm(int(SECONDS_PER_CASE) * 3)
    try:
        code = cli.main(argv, stdout=out, stderr=err)
    finally:
        signal.alarm(0)
        if previous is None:
            os.environ.pop("DRA_WEB_DEBUG", None)
        else:
            os.environ["DRA_WEB_DEBUG"] = previous
    return code, out.getvalue(), err.getvalue(), time.monotonic() - started


@settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not FUZZ_EXAMPLES,  # the suite is reproducible; make fuzz explores
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(case=mutated_snapshot(), command=st.sampled_from(["validate", "simulate"]))
def test_mutated_snapshots_exit_0_or_2_quickly(tmp_path_factory, case, command):
    name, content = case
    path = tmp_path_factory.mktemp("fuzz") / name
    path.write_bytes(content)
    argv = [command, str(path)] + (["--timeout", "1"] if command == "simulate" else [])
    code, _, err, seconds = _run(argv)
    event(f"{command} exit {code}")  # --hypothesis-show-statistics: how many got through
    assert code in (cli.EXIT_OK, cli.EXIT_USAGE), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert seconds < SECONDS_PER_CASE, f"{command} took {seconds:.1f}s"
    if code == cli.EXIT_USAGE:
        assert err.strip(), "a refusal says why"


HOSTILE_FILES = {
    "alias-bomb.yaml": BOMB,
    "huge-exponent.yaml": (
        "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\n"
        'status: {allocatable: {cpu: "1e99999999"}}\n'
    ),
    "huge-int.json": '{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}, '
    '"status": {"allocatable": {"cpu": ' + "9" * 5000 + "}}}",
    "owner-refs.yaml": (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: p, ownerReferences: 5}\n"
        "spec: {containers: [{name: c}]}\n"
    ),
    "deep.json": "[" * 50000 + "]" * 50000,
    "deep-block.yaml": "- " * 40000 + "x\n",
    "slash-name.yaml": (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: a/b, namespace: ml}\n"
        "spec: {containers: [{name: c}]}\n"
    ),
}


@pytest.mark.parametrize("name", sorted(HOSTILE_FILES))
@pytest.mark.parametrize("command", ["validate", "simulate"])
def test_hostile_files_as_real_processes(tmp_path, name, command):
    """The real entry point (``python -m allocator``): exit 2 with the reason, no traceback,
    within seconds (the alias bomb took 13 s and 650 MB, 1e99999999 never ended)."""
    path = tmp_path / name
    path.write_text(HOSTILE_FILES[name])
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "allocator", command, str(path)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == cli.EXIT_USAGE, proc.stderr
    assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert name in proc.stderr  # the message names the file
    assert time.monotonic() - started < 30
