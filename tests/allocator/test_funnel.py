"""The funnel's grouping, aggregation and words (allocator/funnel.py)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from allocator.checks import Refusal
from allocator.funnel import (
    aggregate,
    build_funnel,
    cause_text,
    clip_words,
    decisive_reason,
    summary_lines,
)

SELECTOR = 'device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"'


def t4(i: int) -> tuple[str, Refusal]:
    return (
        f"gpu.nvidia.com/node-a/gpu-{i}",
        Refusal(
            "selector",
            f'{SELECTOR}: productName is "Tesla T4"',
            {
                "expression": SELECTOR,
                "source": "request gpu",
                "values": {"productName": ["Tesla T4"]},
            },
            (SELECTOR, "Tesla T4"),
        ),
    )


def held(i: int, claim: str) -> tuple[str, Refusal]:
    holder = {"claim": claim, "pods": [f"{claim.removesuffix('-gpu')}"], "inRun": False}
    return (
        f"gpu.nvidia.com/node-a/gpu-{i}",
        Refusal("allocated", f"allocated to claim {claim}", {"holders": [holder]}),
    )


def test_groups_by_reason_and_group_largest_first() -> None:
    f = build_funnel(
        "default/train-0-gpu",
        "gpu",
        1,
        "p5.48xlarge",
        [held(0, "default/serve-0-gpu"), t4(1), t4(2), ("gpu.nvidia.com/node-a/gpu-3", None)],
    )
    assert (f.candidates, f.usable) == (4, 1)
    assert [(g.reason, g.devices) for g in f.rejections] == [("selector", 2), ("allocated", 1)]
    assert f.rejections[0].message == f'{SELECTOR}: productName is "Tesla T4" on 2 devices'
    assert f.rejections[0].example_devices == (
        "gpu.nvidia.com/node-a/gpu-1",
        "gpu.nvidia.com/node-a/gpu-2",
    )
    assert decisive_reason(f) == "selector"
    assert cause_text(f) == (
        '(2 rejected by selector: productName is "Tesla T4"; 1 rejected by allocated: '
        "allocated to claim default/serve-0-gpu)"
    )


def test_holders_of_one_group_are_merged_and_named() -> None:
    f = build_funnel(
        "default/train-0-gpu",
        "gpu",
        1,
        None,
        [held(i, f"default/serve-{i}-gpu") for i in range(5)],
    )
    (g,) = f.rejections
    assert [h["claim"] for h in g.detail["holders"]] == [f"default/serve-{i}-gpu" for i in range(5)]
    assert g.message.startswith(
        "allocated to claim default/serve-0-gpu (reserved for default/serve-0)"
    )
    assert g.message.endswith("and 2 more claims on 5 devices")


@given(st.lists(st.sampled_from(["usable", "t4", "held-a", "held-b"]), max_size=30))
def test_every_candidate_is_counted_once(kinds: list[str]) -> None:
    refusals = []
    for i, kind in enumerate(kinds):
        if kind == "usable":
            refusals.append((f"d/p/{i}", None))
        elif kind == "t4":
            refusals.append(t4(i))
        else:
            refusals.append(held(i, f"default/{kind}"))
    f = build_funnel("default/c", "gpu", 1, None, refusals)
    assert f.usable + sum(g.devices for g in f.rejections) == f.candidates == len(kinds)
    assert all(len(g.example_devices) <= 5 for g in f.rejections)


def test_aggregate_is_per_way_of_refusing_not_per_target() -> None:
    def node(name: str, holder: str):
        return build_funnel("default/x-gpu", "gpu", 1, None, [held(0, holder), held(1, holder)])

    pairs = [(f"node/n{i}", node(f"n{i}", f"default/serve-{i}-gpu")) for i in range(12)]
    pairs.append(("node/t4", build_funnel("default/x-gpu", "gpu", 1, None, [t4(0)])))
    out = aggregate(pairs)
    assert [e["targets"] for e in out] == [12, 1]
    assert out[0]["exampleTargets"] == [f"node/n{i}" for i in range(5)]
    # A cached funnel standing for another claim of the same spec is renamed.
    (renamed,) = aggregate([("node/t4", pairs[-1][1], "default/y-gpu")])
    assert renamed["claim"] == "default/y-gpu"


def test_summary_lines_and_clipping_never_cut_a_word() -> None:
    f = build_funnel("default/x-gpu", "gpu", 1, "p5.48xlarge", [t4(i) for i in range(4)])
    (entry,) = aggregate([("node/node-a", f)])
    head, causes = summary_lines(entry, "")
    assert (
        head
        == "claim default/x-gpu request gpu on node/node-a (p5.48xlarge): 0 of 4 devices usable, 1 needed"
    )
    assert causes == f'  4 selector: {SELECTOR}: productName is "Tesla T4" on 4 devices'
    text = " ".join(["productName"] * 40)
    clipped = clip_words(text, 50)
    assert clipped.endswith(" ...") and len(clipped) <= 50
    assert all(w == "productName" for w in clipped.removesuffix(" ...").split())
