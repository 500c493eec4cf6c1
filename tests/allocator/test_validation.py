"""Request Validation: the design's error table, All mode pre-computation, the 32 limit."""

from __future__ import annotations

from dataclasses import replace

import pytest

from allocator.cel import SelectorEngine
from allocator.errors import ValidationError
from allocator.featuregates import ALL_ON
from allocator.model import DeviceSelector
from allocator.pipeline import build_pipeline, core_pipeline
from allocator.pools import SliceUniverse, template_devices
from allocator.requests import SelectorMatcher
from allocator.requirements import Requirements
from allocator.validation import (
    ValidationContext,
    validate_claim_request,
    validate_exact_request,
)
from tests.allocator.builders import (
    CLASSES,
    GPU,
    GPU_CLASS,
    NIC,
    PCIE_ROOT,
    claim,
    device_class,
    exact,
    first_available,
    gpus,
    instance_type,
    match_attribute,
    nic,
    resource_slice,
    template,
)


def ctx(c, slices=(), its=(), classes=None, pipeline=None):
    """Request Validation with the design's core unless ``pipeline`` is given."""
    pools = SliceUniverse(list(slices)).gather(None, [Requirements()])
    engine = SelectorEngine()
    return ValidationContext(
        claim=c,
        claim_index=0,
        pools=pools,
        template_devices_by_it=template_devices(
            {it.name: it.resource_slice_templates for it in its}
        ),
        instance_types=[it.name for it in its],
        engine=engine,
        device_classes=classes if classes is not None else CLASSES,
        matcher=SelectorMatcher(engine),
        rules=pipeline if pipeline is not None else core_pipeline(ALL_ON),
    )


def test_valid_claim_merges_class_then_request_selectors():
    c = claim(
        "train",
        exact("gpu", count=2, selectors=['device.attributes["gpu.nvidia.com"].model == "H100"']),
        constraints=[match_attribute(PCIE_ROOT)],
    )
    data = validate_claim_request(ctx(c))
    (r,) = data.requests
    assert r.num_devices == 2 and r.allocation_mode == "ExactCount"
    assert [s.cel for s in r.selectors] == [
        GPU_CLASS.selectors[0].cel,
        'device.attributes["gpu.nvidia.com"].model == "H100"',
    ]
    assert len(r.compiled) == 2 and r.all_devices is None
    (con,) = data.constraints
    assert con.fallback is None  # binding fallback is nil during validation


@pytest.mark.parametrize(
    ("build", "substring"),
    [
        (lambda: claim("c", first_available("gpu", ("h100", exact("x")))), "only Exactly requests"),
        (lambda: claim("c", exact("gpu", "no-such-class")), "not found"),
        (lambda: claim("c", exact("gpu", "opaque")), "unsupported selector type"),
        (lambda: claim("c", exact("gpu", selectors=["device.driver =="])), "failed to compile"),
        (
            lambda: claim(
                "c", exact("gpu", selectors=['device.attributes["gpu.nvidia.com"].model == "H100'])
            ),
            "failed to compile",
        ),
    ],
)
def test_error_table_rows(build, substring):
    classes = dict(CLASSES)
    opaque = device_class("opaque")
    opaque.selectors.append(DeviceSelector(cel=None, raw={"opaque": {}}))
    classes["opaque"] = opaque
    with pytest.raises(ValidationError, match=substring):
        validate_claim_request(ctx(build(), classes=classes))


def test_unsupported_constraint_type():
    from allocator.model import DeviceConstraint

    c = claim("c", exact("gpu"), constraints=[DeviceConstraint(raw={"sameRack": {}})])
    with pytest.raises(ValidationError, match="unsupported constraint type"):
        validate_claim_request(ctx(c))


def test_all_mode_invalid_and_incomplete_pools():
    dup = [
        resource_slice("rack-0", gpus(2), pool="rack", all_nodes=True, count=2),
        resource_slice("rack-1", gpus(1), pool="rack", all_nodes=True, count=2),
    ]
    with pytest.raises(ValidationError, match="invalid"):
        validate_claim_request(ctx(claim("c", exact("gpu", mode="All")), dup))
    short = [resource_slice("rack-0", gpus(2), pool="rack", all_nodes=True, count=2)]
    with pytest.raises(ValidationError, match="incomplete"):
        validate_claim_request(ctx(claim("c", exact("gpu", mode="All")), short))
    # ExactCount does not need a complete view.
    validate_claim_request(ctx(claim("c", exact("gpu")), short))


def test_all_mode_precomputes_in_cluster_and_template_devices():
    slices = [
        resource_slice("rack", gpus(2), all_nodes=True),
        resource_slice("nics", [nic("nic-0")], driver=NIC, all_nodes=True),
    ]
    p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8))])
    nics_only = instance_type("c7gn.16xlarge", [template("c7-nics", [nic("nic-0")], driver=NIC)])
    (r,) = validate_claim_request(
        ctx(claim("c", exact("gpu", mode="All")), slices, [p5, nics_only])
    ).requests
    assert [d.id.device for d in r.all_devices] == ["gpu-0", "gpu-1"]
    assert len(r.all_template_devices_by_it["p5.48xlarge"]) == 8
    # No template match, but in-cluster matches exist: the instance type is kept.
    assert r.all_template_devices_by_it["c7gn.16xlarge"] == []
    assert r.slots_for("c7gn.16xlarge")[0].id.device == "gpu-0"


def test_all_mode_instance_type_pruned_when_nothing_matches():
    p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8))])
    nics_only = instance_type("c7gn.16xlarge", [template("c7-nics", [nic("nic-0")], driver=NIC)])
    data = validate_claim_request(ctx(claim("c", exact("gpu", mode="All")), (), [p5, nics_only]))
    assert "c7gn.16xlarge" not in data.requests[0].all_template_devices_by_it
    pruned = data.pruned_instance_types["c7gn.16xlarge"]
    assert pruned.code == "no-devices" and "no device matches" in pruned.message
    assert "p5.48xlarge" not in data.pruned_instance_types


def test_max_size_base_total_exceeding_maximum():
    with pytest.raises(ValidationError, match="exceeding maximum"):
        validate_claim_request(
            ctx(claim("c", exact("gpu", count=20), exact("nic", "nic.example.com", count=13)))
        )
    validate_claim_request(
        ctx(claim("c", exact("gpu", count=20), exact("nic", "nic.example.com", count=12)))
    )
    slices = [resource_slice("rack", gpus(30), all_nodes=True)]
    with pytest.raises(ValidationError, match="exceeding maximum"):
        validate_claim_request(
            ctx(claim("c", exact("gpu", mode="All"), exact("g2", count=3)), slices)
        )


def test_max_size_prunes_instance_types_by_their_template_count():
    slices = [resource_slice("rack", gpus(16), all_nodes=True)]
    p5 = instance_type("p5.48xlarge", [template("p5-gpus", gpus(8, prefix="t-"))])  # 16+8 ok
    big = instance_type("p6.96xlarge", [template("p6-gpus", gpus(20, prefix="t-"))])  # 16+20 no
    data = validate_claim_request(ctx(claim("c", exact("gpu", mode="All")), slices, [p5, big]))
    r = data.requests[0]
    assert set(r.all_template_devices_by_it) == {"p5.48xlarge"}
    pruned = data.pruned_instance_types["p6.96xlarge"]
    assert pruned.code == "exceeding-maximum" and "exceeding maximum" in pruned.message


def test_max_size_all_instance_types_pruned():
    slices = [resource_slice("rack", gpus(16), all_nodes=True)]
    big = instance_type("p6.96xlarge", [template("p6-gpus", gpus(20, prefix="t-"))])
    bigger = instance_type("p6e.96xlarge", [template("p6e-gpus", gpus(24, prefix="t-"))])
    with pytest.raises(ValidationError, match="all instance types pruned"):
        validate_claim_request(ctx(claim("c", exact("gpu", mode="All")), slices, [big, bigger]))


def test_pipeline_first_available_handler_and_request_validators():
    c = claim("c", first_available("gpu", ("h100", exact("h100", count=2)), ("any", exact("any"))))

    def handler(vctx, req):
        return [
            validate_exact_request(vctx, f"{req.name}/{s.name}", s.request)
            for s in req.first_available
        ]

    seen = []
    pipeline = replace(
        core_pipeline(ALL_ON),
        first_available=handler,
        request_validators=(lambda vctx, r: seen.append(r.name),),
    )
    (r,) = validate_claim_request(ctx(c, pipeline=pipeline)).requests
    assert [a.name for a in r.alternatives] == ["gpu/h100", "gpu/any"]
    assert r.max_devices() == 2
    assert seen == ["gpu/h100", "gpu/any"]
    # The design's core has no FirstAvailable; the features' pipeline has DRAPrioritizedList.
    with pytest.raises(ValidationError, match="only Exactly requests"):
        validate_claim_request(ctx(c, pipeline=core_pipeline(ALL_ON)))
    (r,) = validate_claim_request(ctx(c, pipeline=build_pipeline(ALL_ON))).requests
    assert [a.name for a in r.alternatives] == ["gpu/h100", "gpu/any"]


def test_request_validator_can_reject():
    def no_admin(vctx, r):
        raise ValidationError(
            f"claim {vctx.claim_key}: request {r.name}: admin access not permitted"
        )

    pipeline = replace(core_pipeline(ALL_ON), request_validators=(no_admin,))
    with pytest.raises(ValidationError, match="admin access"):
        validate_claim_request(ctx(claim("c", exact("gpu")), pipeline=pipeline))
    validate_claim_request(ctx(claim("c", exact("gpu"))))  # the core validates it
    assert GPU  # the GPU driver constant is the one the class selects
