"""What a run's page shows from its snapshot, derived when the run is stored (runs/page_facts.py):
the same facts as the typed snapshot gives, kept through storage, and never a failed run."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from allocator.simulation import simulate
from allocator.snapshot import load_documents, load_paths
from dra_web import blobs
from dra_web.runs.page_facts import (
    EMPTY_POOL,
    INTENT_NOT_FOUND,
    PageFacts,
    claim_intent,
    claim_specs,
    derive,
)
from tests.pages.builders import FIXTURE, GPU

NODE_A = "ip-10-0-1-7.us-west-2.compute.internal"
NODE_B = "ip-10-0-2-9.us-west-2.compute.internal"


@pytest.fixture(scope="module")
def simulated():
    """The GPU training snapshot and the result the simulator makes of it."""
    model = load_paths([str(FIXTURE)])
    return model, simulate(model).result


def test_each_claim_of_the_result_is_shown_beside_what_it_asked_for(simulated):
    model, result = simulated
    facts = derive(model, result)
    specs = claim_specs(model.documents)
    claims = [(p["pod"], c["claim"]) for p in result["pods"] for c in p.get("claims") or []]
    assert claims
    for pod, claim in claims:
        assert facts.intent(pod, claim) == claim_intent(specs, pod, claim)
    # ml/train-0 and ml/train-1 ask through one template (one-h100): one intent for both.
    assert len(facts.intents) < len(claims)
    assert facts.intent("ml/train-0", "ml/train-0-gpu")["source"] == (
        "ResourceClaimTemplate one-h100"
    )
    assert facts.intent("ml/unknown", "ml/unknown-gpu") == INTENT_NOT_FOUND


def test_nodeclaims_are_priced_from_the_offerings_of_their_instance_types(simulated):
    model, result = simulated
    facts = derive(model, result)
    listed = {n for nc in result["nodeClaims"] for n in nc["instanceTypes"]}
    assert listed and set(facts.offerings) == listed & set(model.instance_types)
    for name, offerings in facts.offerings.items():
        assert [(o.zone, o.capacity_type, o.price, o.available) for o in offerings] == [
            (o.zone, o.capacity_type, o.price, o.available)
            for o in model.instance_types[name].offerings
        ]
    # The NodePool each NodeClaim starts from, its requirements sorted by key.
    pools = {nc["nodePool"] for nc in result["nodeClaims"]}
    assert set(facts.node_pool_requirements) == pools
    for requirements in facts.node_pool_requirements.values():
        keys = [r["key"] for r in requirements]
        assert keys == sorted(keys) and "node.kubernetes.io/instance-type" in keys
    # The scheduler reports the template slices of its NodeClaims: none kept twice.
    assert all("templateSlices" in nc for nc in result["nodeClaims"])
    assert facts.template_slices == {}


def test_template_slices_are_kept_for_results_that_do_not_carry_them(simulated):
    model, result = simulated
    older = {
        **result,
        "nodeClaims": [
            {k: v for k, v in nc.items() if k != "templateSlices"} for nc in result["nodeClaims"]
        ],
    }
    facts = derive(model, older)
    assert "p5.48xlarge" in facts.template_slices
    slices = facts.template_slices["p5.48xlarge"]
    assert slices and all(s["driver"] == GPU for s in slices)
    assert all(d["name"] for s in slices for d in s["devices"])


def _slice(name: str, node: str, pool: str, generation: int, devices: int) -> tuple[str, dict]:
    return (
        "ResourceSlice",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": name},
            "spec": {
                "driver": GPU,
                "nodeName": node,
                "pool": {"name": pool, "generation": generation, "resourceSliceCount": 1},
                "devices": [
                    {
                        "name": f"gpu-{g}",
                        "attributes": {"productName": {"string": "NVIDIA H100 80GB HBM3"}},
                    }
                    for g in range(devices)
                ],
            },
        },
    )


def test_a_pool_counts_the_devices_of_its_newest_generation_only():
    model = load_documents(
        [
            _slice(f"{NODE_A}-gpus-old", NODE_A, NODE_A, 1, 8),
            _slice(f"{NODE_A}-gpus", NODE_A, NODE_A, 2, 4),
            _slice(f"{NODE_B}-gpus", NODE_B, NODE_B, 1, 8),
        ]
    )
    result = {"pools": [{"driver": GPU, "pool": NODE_A}, {"driver": GPU, "pool": "gone"}]}
    facts = derive(model, result)
    assert facts.pool_summary(GPU, NODE_A) == {
        "device_count": 4,
        "slices_seen": 1,
        "access": f"node {NODE_A}",
    }
    # Only the result's pools are kept; one the snapshot does not publish shows empty.
    assert facts.pool_summary(GPU, NODE_B) == EMPTY_POOL
    assert facts.pool_summary(GPU, "gone") == EMPTY_POOL


def test_a_snapshot_that_no_longer_loads_shows_no_facts(simulated):
    _, result = simulated
    facts = derive(None, result)
    assert facts == PageFacts()
    assert facts.intent("ml/train-0", "ml/train-0-gpu") == INTENT_NOT_FOUND


def test_the_facts_come_back_from_storage_as_they_were_derived(simulated):
    model, result = simulated
    facts = derive(model, result)
    assert PageFacts.from_json(blobs.unpack(blobs.pack(facts.to_json()))) == facts


_names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789.-", min_size=1, max_size=20)
_offerings = st.builds(
    lambda zone, capacity, price, available: (zone, capacity, price, available),
    st.sampled_from(["us-west-2a", "us-west-2b", "us-west-2c"]),
    st.sampled_from(["on-demand", "spot", "reserved"]),
    st.floats(min_value=0, max_value=1000, allow_nan=False),
    st.booleans(),
)
_summaries = st.fixed_dictionaries(
    {
        "device_count": st.integers(0, 64),
        "slices_seen": st.integers(0, 4),
        "access": st.sampled_from(["", "—", "all nodes", f"node {NODE_A}"]),
    }
)


@settings(max_examples=50, deadline=None)
@given(
    offerings=st.dictionaries(_names, st.lists(_offerings, max_size=4), max_size=5),
    pools=st.dictionaries(_names, st.dictionaries(_names, _summaries, max_size=3), max_size=3),
    claims=st.dictionaries(_names, st.dictionaries(_names, st.integers(0, 2)), max_size=4),
)
def test_any_facts_survive_storage(offerings, pools, claims):
    from allocator.model import Offering

    facts = PageFacts(
        offerings={
            name: tuple(
                Offering(zone=z, capacity_type=c, price=p, available=a) for z, c, p, a in rows
            )
            for name, rows in offerings.items()
        },
        pools=pools,
        intents=[dict(INTENT_NOT_FOUND), {**INTENT_NOT_FOUND, "found": True}, {}],
        claim_intents=claims,
    )
    assert PageFacts.from_json(blobs.unpack(blobs.pack(facts.to_json()))) == facts


# --- stored with the run ----------------------------------------------------------------------


@pytest.fixture
def snapshot(db, django_user_model):
    from dra_web.snapshots.services import create_snapshot

    maria = django_user_model.objects.create_user("maria")
    return create_snapshot(maria, [(FIXTURE.name, FIXTURE.read_bytes())], "gpu-training")


def test_a_stored_run_carries_the_facts_of_its_snapshot(snapshot, simulated):
    from dra_web.runs import selectors as run_selectors
    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output

    _, result = simulated
    run = Run.objects.create(snapshot=snapshot, owner=snapshot.owner, options={})
    assert store_output(run.pk, result, None)  # loads the snapshot itself
    run.refresh_from_db()
    stored = run_selectors.page_facts(run)
    assert stored == derive(load_paths([str(FIXTURE)]), result)
    assert stored.offerings and stored.claim_intents


def test_deriving_the_facts_never_fails_a_finished_run(snapshot, simulated, monkeypatch):
    from dra_web.runs import page_facts
    from dra_web.runs import selectors as run_selectors
    from dra_web.runs.models import Run
    from dra_web.runs.worker import store_output

    def broken(model, result):
        raise KeyError("nodeClaims")

    monkeypatch.setattr(page_facts, "derive", broken)
    _, result = simulated
    run = Run.objects.create(snapshot=snapshot, owner=snapshot.owner, options={})
    assert store_output(run.pk, result, None)
    run.refresh_from_db()
    assert run.status == Run.SUCCEEDED and run.result == result
    # Not stored: the page derives them from the snapshot when it is first shown.
    assert run_selectors.page_facts(run) is None
