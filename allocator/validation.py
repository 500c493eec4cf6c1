"""Request Validation: ResourceClaim -> ClaimData, before the DFS (the design's error table).

What the DRA features add comes from the run's pipeline, read through ``ValidationRules``
(``allocator/pipeline.py``'s ``Pipeline`` is one): its constraint parsers, its FirstAvailable
handler (DRAPrioritizedList) and its request validators (admin access, capacity, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import field
from typing import Any, Protocol

from allocator.constraints import ConstraintParseContext, ConstraintParser, parse_constraint
from allocator.errors import ValidationError
from allocator.featuregates import FeatureGates
from allocator.model import (
    ALLOCATION_RESULTS_MAX_SIZE,
    DeviceClass,
    DeviceRequest,
    ExactDeviceRequest,
    Namespace,
    ResourceClaim,
)
from allocator.pools import DeviceWithID, Pool
from allocator.records import record
from allocator.requests import (
    ALL,
    EXACT_COUNT,
    ClaimData,
    PrunedInstanceType,
    RequestData,
    SelectorMatcher,
)

NO_DEVICES = "no-devices"
EXCEEDING_MAXIMUM = "exceeding-maximum"


class ValidationRules(Protocol):
    """What Request Validation reads of the run's pipeline."""

    @property
    def gates(self) -> FeatureGates: ...
    @property
    def first_available(self) -> FirstAvailableHandler | None: ...
    @property
    def request_validators(self) -> Sequence[RequestValidator]: ...
    def constraint_parser(self, kind: str) -> ConstraintParser | None: ...


@record
class ValidationContext:
    """What a claim's validators read: the claim, pools, devices and the run's rules."""

    claim: ResourceClaim
    claim_index: int
    pools: Sequence[Pool]
    template_devices_by_it: Mapping[str, list[DeviceWithID]]
    instance_types: Sequence[str]
    engine: Any
    device_classes: Mapping[str, DeviceClass]
    matcher: SelectorMatcher
    rules: ValidationRules
    namespaces: Mapping[str, Namespace] = field(default_factory=dict)

    @property
    def claim_key(self) -> str:
        return self.claim.key

    @property
    def gates(self) -> FeatureGates:
        return self.rules.gates


# A FirstAvailable handler returns the subrequests' RequestData, in order (built with
# ``validate_exact_request``); it and a request validator may raise ValidationError.
FirstAvailableHandler = Callable[[ValidationContext, DeviceRequest], list[RequestData]]
RequestValidator = Callable[[ValidationContext, RequestData], None]


def _compile(ctx: ValidationContext, where: str, expression: str) -> Any:
    try:
        return ctx.engine.compile(expression)
    except ValueError as e:
        text = str(e)
        if "failed to compile" not in text:
            text = f"failed to compile: {text}"
        raise ValidationError(f"claim {ctx.claim_key}: {where}: {text}") from e


def validate_exact_request(
    ctx: ValidationContext, name: str, exact: ExactDeviceRequest
) -> RequestData:
    where = f"request {name}"
    device_class = ctx.device_classes.get(exact.device_class_name)
    if device_class is None:
        raise ValidationError(
            f"claim {ctx.claim_key}: {where}: device class {exact.device_class_name!r} not found",
            request=name,
        )
    selectors = list(device_class.selectors) + list(exact.selectors)
    compiled = []
    for i, sel in enumerate(selectors):
        origin = (
            f"device class {device_class.name}"
            if i < len(device_class.selectors)
            else f"{where} selector {i - len(device_class.selectors)}"
        )
        if sel.cel is None:
            raise ValidationError(
                f"claim {ctx.claim_key}: {where}: unsupported selector type in {origin} "
                "(only CEL selectors are supported)",
                request=name,
            )
        compiled.append(_compile(ctx, origin, sel.cel))
    mode = exact.allocation_mode or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ValidationError(
            f"claim {ctx.claim_key}: {where}: unsupported allocation mode {mode!r}", request=name
        )
    data = RequestData(
        name=name,
        device_class=device_class,
        num_devices=exact.count if mode == EXACT_COUNT else 0,
        allocation_mode=mode,
        selectors=selectors,
        compiled=compiled,
        exact=exact,
    )
    for validator in ctx.rules.request_validators:
        validator(ctx, data)
    if mode == ALL:
        _precompute_all(ctx, data)
    return data


def _precompute_all(ctx: ValidationContext, data: RequestData) -> None:
    in_cluster: list[DeviceWithID] = []
    for pool in ctx.pools:
        pool_name = f"{pool.key.driver}/{pool.key.pool}"
        if pool.invalid:
            raise ValidationError(
                f"claim {ctx.claim_key}: request {data.name}: allocation mode All needs every "
                f"pool: pool {pool_name} is invalid ({pool.invalid_reason})",
                request=data.name,
            )
        if pool.incomplete:
            raise ValidationError(
                f"claim {ctx.claim_key}: request {data.name}: allocation mode All needs every "
                f"pool: pool {pool_name} is incomplete",
                request=data.name,
            )
        for cand in pool.devices:
            if ctx.matcher.match(data, ctx.claim_index, cand)[0]:
                in_cluster.append(cand)
    data.all_devices = in_cluster
    by_it: dict[str, list[DeviceWithID]] = {}
    for it in _instance_types(ctx):
        matches = [
            c
            for c in ctx.template_devices_by_it.get(it, ())
            if ctx.matcher.match(data, ctx.claim_index, c)[0]
        ]
        # Kept when it has template matches or there are in-cluster matches.
        if matches or in_cluster:
            by_it[it] = matches
    data.all_template_devices_by_it = by_it


def _instance_types(ctx: ValidationContext) -> list[str]:
    return list(dict.fromkeys([*ctx.instance_types, *ctx.template_devices_by_it]))


def validate_claim_request(ctx: ValidationContext) -> ClaimData:
    """The design's ValidateClaimRequest. Constraints get no binding fallback here."""
    claim = ctx.claim
    key = claim.key
    rules = ctx.rules
    parse_ctx = ConstraintParseContext(key, [r.name for r in claim.spec.requests], ctx.gates)
    constraints = [
        parse_constraint(dc, parse_ctx, rules.constraint_parser) for dc in claim.spec.constraints
    ]
    requests: list[RequestData] = []
    for req in claim.spec.requests:
        if req.exactly is not None:
            requests.append(validate_exact_request(ctx, req.name, req.exactly))
        elif req.first_available:
            if rules.first_available is None:
                raise ValidationError(
                    f"claim {key}: request {req.name}: only Exactly requests are supported "
                    "(firstAvailable needs the DRAPrioritizedList feature)",
                    request=req.name,
                )
            alternatives = rules.first_available(ctx, req)
            requests.append(
                RequestData(req.name, None, 0, EXACT_COUNT, [], alternatives=alternatives)
            )
        else:
            raise ValidationError(
                f"claim {key}: request {req.name}: only Exactly requests are supported "
                "(the request has neither exactly nor firstAvailable)",
                request=req.name,
            )
    pruned = _enforce_max_size(key, requests, ctx)
    return ClaimData(ctx.claim_index, key, claim, requests, constraints, pruned)


def _enforce_max_size(
    key: str, requests: list[RequestData], ctx: ValidationContext
) -> dict[str, PrunedInstanceType]:
    pruned: dict[str, PrunedInstanceType] = {}
    all_requests = [r for r in requests if r.allocation_mode == ALL and not r.alternatives]
    # Step 2 of All mode: instance types with neither template nor in-cluster matches.
    for r in all_requests:
        kept = r.all_template_devices_by_it or {}
        for it in _instance_types(ctx):
            if it not in kept and it not in pruned:
                pruned[it] = PrunedInstanceType(
                    NO_DEVICES, f"request {r.name}: no device matches (allocation mode All)"
                )
    # 3a: base total. A FirstAvailable request counts its smallest alternative (a floor, as
    # Karpenter's ValidateClaimRequest does); the DFS checks the alternatives it picks.
    base = sum(
        min(a.max_devices() for a in r.alternatives) if r.alternatives else r.max_devices()
        for r in requests
    )
    if base > ALLOCATION_RESULTS_MAX_SIZE:
        raise ValidationError(
            f"claim {key}: {base} devices requested, exceeding maximum of "
            f"{ALLOCATION_RESULTS_MAX_SIZE} devices per claim"
        )
    # 3b: per instance type, the All-mode template devices on top of the base. A
    # FirstAvailable request adds the fewest its alternatives would (Karpenter's MIN floor).
    fa_requests = [r for r in requests if r.alternatives]
    candidates: list[str] = []
    for r in all_requests + [a for f in fa_requests for a in f.alternatives]:
        for it in r.all_template_devices_by_it or {}:
            if it not in candidates:
                candidates.append(it)

    def templates_on(r: RequestData, it: str) -> int:
        return len((r.all_template_devices_by_it or {}).get(it, ()))

    for it in candidates:
        total = (
            base
            + sum(templates_on(r, it) for r in all_requests)
            + sum(min(templates_on(a, it) for a in f.alternatives) for f in fa_requests)
        )
        if total > ALLOCATION_RESULTS_MAX_SIZE:
            for r in all_requests + [a for f in fa_requests for a in f.alternatives]:
                (r.all_template_devices_by_it or {}).pop(it, None)
            pruned[it] = PrunedInstanceType(
                EXCEEDING_MAXIMUM,
                f"{total} devices with the instance type's template devices, exceeding maximum "
                f"of {ALLOCATION_RESULTS_MAX_SIZE} devices per claim",
            )
    # 3c: every instance type went. (Only one with template devices can exceed the limit once
    # the base total passed, so "template devices were provided" holds whenever this fires.)
    if candidates and not any(
        r.all_template_devices_by_it
        for r in all_requests + [a for f in fa_requests for a in f.alternatives]
    ):
        raise ValidationError(
            f"claim {key}: all instance types pruned: each would need more than "
            f"{ALLOCATION_RESULTS_MAX_SIZE} devices (exceeding maximum)"
        )
    return pruned
