"""API fuzzing: hypothesis drives the REST endpoints through Django's test client
with hostile bodies, query strings, paths, run options and mutated snapshots. Every answer is
below 500, JSON for API paths, and the server answers a plain request afterwards.

`make test` runs FUZZ_EXAMPLES (default 40) cases per property, about 300 in all; `make fuzz`
sets FUZZ_EXAMPLES to thousands.
"""

from __future__ import annotations

import copy
import json
import os
from urllib.parse import quote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bench.workloads import synthetic_cluster, to_yaml
from dra_web.runs import worker as run_worker

pytestmark = pytest.mark.django_db

EXAMPLES = int(os.environ.get("FUZZ_EXAMPLES", "40"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=EXAMPLES <= 40,  # `make test` is reproducible; `make fuzz` explores
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

# Text with the characters that broke things: NUL, lone surrogates, slashes, quotes, '%'.
nasty_text = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ["\x00", "\ud800", "a/b", "../..", "%00", "%", "?", "#", "'", '"', "<script>", "é", " "]
    ),
)
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**420), max_value=10**420),
    st.floats(allow_nan=False, allow_infinity=False),
    nasty_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(nasty_text, inner, max_size=4)
    ),
    max_leaves=12,
)
OPTION_KEYS = [
    "timeout",
    "featureGates",
    "disrupt",
    "trace",
    "traceMaxNodes",
    "bindingTimeoutSeconds",
]


def _check(response, path: str) -> None:
    assert response.status_code < 500, (path, response.status_code, response.content[:300])
    if path.startswith("/api/") and response.status_code != 204:
        assert response["Content-Type"].startswith("application/json"), (path, response)
        body = json.loads(response.content)
        if response.status_code >= 400:  # the API's one error shape
            assert set(body) == {"detail", "errors"}, (path, body)
            assert body["detail"] and body["errors"], (path, body)


def _still_answers(api) -> None:
    assert api.get("/api/runs/").status_code == 200


def _raw_json(value) -> str:
    # json.dumps writes lone surrogates as \\udXXX escapes: the body is valid UTF-8 bytes.
    return json.dumps(value)


@pytest.fixture
def snapshot_id(api):
    response = api.post(
        "/api/snapshots/", to_yaml(synthetic_cluster()), content_type="application/yaml"
    )
    assert response.status_code == 201
    return response.json()["id"]


@FUZZ
@given(
    options=st.one_of(
        json_values,
        st.dictionaries(st.sampled_from(OPTION_KEYS), json_values, max_size=3),
    ),
    snapshot=st.one_of(st.just(None), json_values),
)
def test_run_creation_never_500s(api, snapshot_id, options, snapshot):
    body = {"snapshot": snapshot_id if snapshot is None else snapshot, "options": options}
    response = api.post("/api/runs/", _raw_json(body), content_type="application/json")
    _check(response, "/api/runs/")
    if response.status_code == 202:
        run = api.get(f"/api/runs/{response.json()['id']}/")
        _check(run, "/api/runs/ID/")
        assert run.json()["options"]["timeout"] > 0
    _still_answers(api)


@FUZZ
@given(
    path=st.sampled_from(
        [
            "/api/snapshots/",
            "/api/runs/",
            "/api/runs/1/trace/",
            "/api/snapshots/1/objects/",
            "/api/runs/1/diff/1/",
        ]
    ),
    params=st.dictionaries(
        st.sampled_from(
            [
                "q",
                "owner",
                "status",
                "snapshot",
                "page",
                "page_size",
                "parent",
                "node",
                "reason",
                "kind",
                "has_open_review",
                "filename",
                "download",
            ]
        ),
        nasty_text,
        max_size=4,
    ),
)
def test_query_strings_never_500(api, snapshot_id, path, params):
    query = "&".join(
        f"{quote(k)}={quote(v, safe='', errors='surrogatepass')}" for k, v in params.items()
    )
    response = api.get(f"{path}?{query}")
    _check(response, path)


@FUZZ
@given(namespace=nasty_text, name=nasty_text, body=json_values)
def test_review_paths_with_any_pod_name_never_500(api, snapshot_id, namespace, name, body):
    created = api.post(
        "/api/runs/", {"snapshot": snapshot_id, "options": {"trace": False}}, format="json"
    )
    run_id = created.json()["id"]
    pod = quote(f"{namespace or 'x'}/{name or 'y'}", safe="/", errors="surrogatepass")
    base = f"/api/runs/{run_id}/pods/{pod}/review/"
    _check(api.get(base), base)
    _check(api.patch(base, _raw_json(body), content_type="application/json"), base)
    _check(
        api.post(base + "comments/", _raw_json({"body": body}), content_type="application/json"),
        base,
    )


BASE_DOCS = synthetic_cluster(nodes=1, running_pods=1, pending_pods=1)


def _mutate(docs, data) -> list:
    """Replace one value somewhere in one document with a fuzzed one (or delete it)."""
    docs = copy.deepcopy(docs)
    doc = data.draw(st.sampled_from(docs))
    node = doc
    for _ in range(data.draw(st.integers(0, 6))):
        if isinstance(node, dict) and node:
            key = data.draw(st.sampled_from(sorted(node, key=str)))
            child = node[key]
        elif isinstance(node, list) and node:
            key = data.draw(st.integers(0, len(node) - 1))
            child = node[key]
        else:
            break
        if not isinstance(child, dict | list):
            break
        node = child
    if isinstance(node, dict) and node:
        key = data.draw(st.sampled_from(sorted(node, key=str)))
        if data.draw(st.booleans()):
            node[key] = data.draw(json_values)
        else:
            del node[key]
    elif isinstance(node, list) and node:
        node[data.draw(st.integers(0, len(node) - 1))] = data.draw(json_values)
    return docs


@FUZZ
@given(data=st.data(), as_yaml=st.booleans())
def test_mutated_snapshot_uploads_never_500(api, data, as_yaml):
    docs = _mutate(BASE_DOCS, data)
    if as_yaml:
        try:
            body = to_yaml(docs).encode("utf-8", "surrogatepass")
        except Exception:  # a value YAML cannot dump: send it as JSON instead
            body = _raw_json(docs).encode()
        response = api.post("/api/snapshots/", body, content_type="application/yaml")
    else:
        response = api.post("/api/snapshots/", _raw_json(docs), content_type="application/json")
    _check(response, "/api/snapshots/")
    if response.status_code == 201:
        snap = response.json()["id"]
        _check(api.get(f"/api/snapshots/{snap}/"), "/api/snapshots/ID/")
        _check(api.get(f"/api/snapshots/{snap}/objects/"), "/api/snapshots/ID/objects/")
        started = api.post("/api/runs/", {"snapshot": snap}, format="json")
        _check(started, "/api/runs/")
        if started.status_code == 202:
            # The test database never commits, so the queued task is run here: whatever the
            # snapshot holds, the run ends in a true state with a message when it fails.
            run_worker.execute_run(started.json()["id"])
            run = api.get(f"/api/runs/{started.json()['id']}/").json()
            assert run["status"] in ("succeeded", "failed"), run
            assert run["status"] == "succeeded" or run["error"], run


@FUZZ
@given(
    body=st.binary(max_size=300),
    content_type=st.sampled_from(
        ["application/yaml", "application/json", "text/plain", "application/octet-stream"]
    ),
)
def test_raw_bytes_uploads_never_500(api, body, content_type):
    response = api.post("/api/snapshots/", body, content_type=content_type)
    _check(response, "/api/snapshots/")
