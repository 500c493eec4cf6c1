"""A pod's volumes as Karpenter reads them (allocator/scheduling/volumes.py): which claims make
Karpenter ignore the pod, the requirement alternatives bound volumes and StorageClasses add, and
CSINode attach limits on existing nodes."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from allocator.model import (
    CSINode,
    CSINodeDriver,
    PersistentVolume,
    PersistentVolumeClaim,
    Pod,
    PodVolume,
    StorageClass,
    TopologySelectorRequirement,
)
from allocator.requirements import LABEL_HOSTNAME, LABEL_ZONE
from allocator.scheduling import volumes as v
from allocator.scheduling.volumes import (
    Storage,
    VolumeProblem,
    VolumeUsage,
    csi_limits,
    pod_volumes,
    usage_of,
    validate_claims,
    volume_topology,
)

NS = "ml"
BOUND = {v.BIND_COMPLETED: "yes"}


def pv(name: str, *zones: str, driver: str = "ebs.csi.aws.com", **kw) -> PersistentVolume:
    affinity = None
    if zones:
        affinity = {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": LABEL_ZONE, "operator": "In", "values": list(zones)}]}
            ]
        }
    return PersistentVolume(name, node_affinity=affinity, csi_driver=driver, **kw)


def claim(name: str, *, volume: str = "", storage_class: str | None = "gp3", **kw):
    annotations = kw.pop("annotations", BOUND if volume else {})
    return PersistentVolumeClaim(
        NS, name, storage_class, volume, annotations=annotations, phase=kw.pop("phase", None), **kw
    )


def gp3(*terms: tuple[str, ...], mode: str = "WaitForFirstConsumer", name: str = "gp3"):
    """gp3 on EBS; each term lists the zones it allows."""
    return StorageClass(
        name,
        "ebs.csi.aws.com",
        mode,
        [(TopologySelectorRequirement(LABEL_ZONE, zones),) for zones in terms],
    )


def pod(*claims: str, ephemeral: tuple[str, ...] = (), name: str = "llama-serve-0") -> Pod:
    volumes = [PodVolume(c, c) for c in claims]
    volumes += [PodVolume(e, f"{name}-{e}", True, "gp3") for e in ephemeral]
    return Pod(namespace=NS, name=name, uid=f"uid-{name}", volumes=volumes)


def storage(*objects) -> Storage:
    return Storage(
        {o.key: o for o in objects if isinstance(o, PersistentVolumeClaim)},
        {o.name: o for o in objects if isinstance(o, PersistentVolume)},
        {o.name: o for o in objects if isinstance(o, StorageClass)},
    )


def zones(alternative) -> set[str]:
    return alternative.requirements.get(LABEL_ZONE).values()


# --- topology ----------------------------------------------------------------------------------


def test_a_model_cache_bound_to_an_ebs_volume_pins_the_pod_to_its_zone():
    found = volume_topology(
        pod("model-cache"),
        storage(claim("model-cache", volume="pvc-0a1b"), pv("pvc-0a1b", "us-west-2b")),
    )
    (alternative,) = found.alternatives
    assert str(alternative.requirements) == "topology.kubernetes.io/zone In [us-west-2b]"
    assert alternative.describe() == (
        "PersistentVolume pvc-0a1b of PersistentVolumeClaim ml/model-cache: "
        "topology.kubernetes.io/zone In [us-west-2b]"
    )


def test_each_allowed_topology_term_of_an_unbound_claims_class_is_an_alternative():
    objects = [claim("checkpoints"), gp3(("us-west-2a",), ("us-west-2b",))]
    found = volume_topology(pod("checkpoints"), storage(*objects))
    assert [zones(a) for a in found.alternatives] == [{"us-west-2a"}, {"us-west-2b"}]
    assert {str(s) for a in found.alternatives for s in a.sources} == {
        "StorageClass gp3 of PersistentVolumeClaim ml/checkpoints"
    }
    one_term = volume_topology(pod("checkpoints"), storage(claim("checkpoints"), gp3(("a", "b"))))
    assert [zones(a) for a in one_term.alternatives] == [{"a", "b"}]


def test_two_volumes_keep_only_the_combinations_that_hold_together():
    objects = [
        claim("model-cache", volume="pvc-0a1b"),
        pv("pvc-0a1b", "us-west-2b"),
        claim("checkpoints"),
        gp3(("us-west-2a",), ("us-west-2b",)),
    ]
    found = volume_topology(pod("model-cache", "checkpoints"), storage(*objects))
    (alternative,) = found.alternatives
    assert zones(alternative) == {"us-west-2b"}
    assert [s.kind for s in alternative.sources] == ["PersistentVolume", "StorageClass"]


def test_volumes_in_two_zones_keep_every_combination_which_then_fits_nowhere():
    objects = [
        claim("cache-a", volume="pv-a"),
        pv("pv-a", "us-west-2a"),
        claim("cache-b", volume="pv-b"),
        pv("pv-b", "us-west-2b"),
    ]
    (alternative,) = volume_topology(pod("cache-a", "cache-b"), storage(*objects)).alternatives
    assert zones(alternative) == set()


def test_hostname_terms_of_local_volumes_are_dropped_and_others_kept():
    terms = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": LABEL_HOSTNAME, "operator": "In", "values": ["ip-1"]}]}
        ]
    }
    local = PersistentVolume("local-nvme", node_affinity=terms, local=True)
    (alternative,) = volume_topology(
        pod("scratch"), storage(claim("scratch", volume="local-nvme"), local)
    ).alternatives
    assert len(alternative.requirements) == 0  # any node
    network = PersistentVolume("ebs", node_affinity=terms, csi_driver="ebs.csi.aws.com")
    (alternative,) = volume_topology(
        pod("scratch"), storage(claim("scratch", volume="ebs"), network)
    ).alternatives
    assert alternative.requirements.get(LABEL_HOSTNAME).values() == {"ip-1"}


def test_volumes_that_constrain_nothing_add_no_alternative():
    objects = [
        claim("shared", volume="nfs-share"),
        PersistentVolume("nfs-share"),
        claim("static", storage_class=""),
        claim("anywhere", storage_class="gp3"),
        gp3(),
    ]
    assert volume_topology(pod("shared", "static", "anywhere"), storage(*objects)) == (
        v.NO_VOLUME_TOPOLOGY
    )


def test_lookups_that_fail_say_what_is_missing():
    missing_claim = volume_topology(pod("model-cache"), storage())
    assert isinstance(missing_claim, VolumeProblem)
    assert missing_claim.message.startswith(
        "discovering persistent volume claim, getting persistent volume claim, "
        'persistentvolumeclaims "model-cache" not found'
    )
    missing_pv = volume_topology(pod("model-cache"), storage(claim("model-cache", volume="gone")))
    assert missing_pv.code == v.VOLUME_NOT_FOUND
    assert 'persistentvolumes "gone" not found' in missing_pv.message
    missing_class = volume_topology(pod("ckpt"), storage(claim("ckpt", storage_class="io2")))
    assert missing_class.message.startswith(
        'getting storage class, storageclasses.storage.k8s.io "io2" not found'
    )


zone_sets = st.frozensets(st.sampled_from(["us-west-2a", "us-west-2b", "us-west-2c"]), min_size=1)


@given(st.lists(st.lists(zone_sets, min_size=1, max_size=3), min_size=1, max_size=3))
def test_merged_alternatives_are_the_combinations_that_intersect(per_volume):
    """Each volume's StorageClass allows some zone terms; the alternatives are every choice of
    one term per volume whose zones intersect. When no choice does, what is left allows no zone
    (Karpenter keeps the combinations of the volume where pruning would leave none)."""
    objects, names = [], []
    for i, terms in enumerate(per_volume):
        objects += [claim(f"c{i}", storage_class=f"sc{i}"), gp3(*map(tuple, terms), name=f"sc{i}")]
        names.append(f"c{i}")
    found = volume_topology(pod(*names), storage(*objects))
    combos = [frozenset.intersection(*c) for c in itertools.product(*per_volume)]
    got = sorted(map(sorted, (zones(a) for a in found.alternatives)))
    if any(combos):
        assert got == sorted(map(sorted, (z for z in combos if z)))
    else:
        assert got and all(z == [] for z in got)


# --- validation --------------------------------------------------------------------------------


def test_valid_claims_pass():
    objects = [
        claim("model-cache", volume="pvc-0a1b"),
        pv("pvc-0a1b", "us-west-2b"),
        claim("checkpoints"),
        gp3(("us-west-2a", "us-west-2b")),
        # Bound claims are not checked for their StorageClass (Karpenter schedules them).
        claim("legacy", volume="pv-legacy", storage_class="retired-class"),
        pv("pv-legacy", "us-west-2a"),
    ]
    assert validate_claims(pod("model-cache", "checkpoints", "legacy"), storage(*objects)) is None


def test_every_claim_karpenter_refuses_is_named_with_karpenters_words():
    cases = {
        v.CLAIM_NOT_FOUND: (
            [],
            'getting persistent volume claim, persistentvolumeclaims "cache" not found '
            "(volume cache)",
        ),
        v.CLAIM_DELETING: (
            [claim("cache", volume="pv-1", deleting=True)],
            "persistentvolumeclaim is being deleted (PersistentVolumeClaim ml/cache)",
        ),
        v.CLAIM_LOST: (
            [claim("cache", volume="pv-1", phase="Lost")],
            "persistentvolumeclaim bound to non-existent persistentvolume "
            "(PersistentVolumeClaim ml/cache, PersistentVolume pv-1)",
        ),
        v.VOLUME_NOT_FOUND: (
            [claim("cache", volume="pv-1")],
            'failed to validate pvc, persistentvolumes "pv-1" not found '
            "(PersistentVolumeClaim ml/cache, PersistentVolume pv-1)",
        ),
        v.VOLUME_DELETING: (
            [claim("cache", volume="pv-1"), pv("pv-1", deleting=True)],
            "failed to validate pvc, persistentvolume is being deleted "
            "(PersistentVolumeClaim ml/cache, PersistentVolume pv-1)",
        ),
        v.CLAIM_NOT_BOUND: (
            [claim("cache", volume="pv-1", annotations={}), pv("pv-1")],
            "pvc is considered unbound because it does not contain annotation "
            "pv.kubernetes.io/bind-completed (PersistentVolumeClaim ml/cache, PersistentVolume pv-1)",
        ),
        v.NO_STORAGE_CLASS: (
            [claim("cache", storage_class="")],
            "unbound pvc must define a storage class (PersistentVolumeClaim ml/cache)",
        ),
        v.STORAGE_CLASS_NOT_FOUND: (
            [claim("cache", storage_class="io2")],
            "failed to validate pvc, failed to get storage class, "
            'storageclasses.storage.k8s.io "io2" not found '
            "(PersistentVolumeClaim ml/cache, StorageClass io2)",
        ),
        v.IMMEDIATE_UNBOUND: (
            [claim("cache"), gp3(mode="Immediate")],
            "failed to validate pvc, pvc with immediate volume binding mode must be bound "
            "(PersistentVolumeClaim ml/cache, StorageClass gp3)",
        ),
    }
    for code, (objects, message) in cases.items():
        problem = validate_claims(pod("cache"), storage(*objects))
        assert (problem.code, problem.message) == (code, message), code
        assert problem.claim == "ml/cache" and problem.volume == "cache"


def test_an_ephemeral_volume_needs_the_claim_its_controller_creates():
    problem = validate_claims(pod(ephemeral=("scratch",)), storage(gp3()))
    assert problem.claim == "ml/llama-serve-0-scratch"
    assert "the ephemeral volume controller has not created its claim" in problem.message
    created = claim("llama-serve-0-scratch")
    assert validate_claims(pod(ephemeral=("scratch",)), storage(created, gp3())) is None


def test_the_first_bad_volume_decides():
    objects = [claim("ok", volume="pv-1"), pv("pv-1"), claim("bad", storage_class="")]
    assert validate_claims(pod("ok", "bad", "missing"), storage(*objects)).code == (
        v.NO_STORAGE_CLASS
    )


# --- attach limits -----------------------------------------------------------------------------


def test_drivers_come_from_the_bound_volume_or_the_storage_class():
    objects = [
        claim("csi", volume="pv-csi"),
        pv("pv-csi", driver="ebs.csi.aws.com"),
        claim("in-tree", volume="pv-intree"),
        PersistentVolume("pv-intree", aws_elastic_block_store=True),
        claim("nfs", volume="pv-nfs"),
        PersistentVolume("pv-nfs"),
        claim("dynamic", storage_class="old-gp2"),
        StorageClass("old-gp2", "kubernetes.io/aws-ebs", "WaitForFirstConsumer"),
        claim("fsx", storage_class="fsx"),
        StorageClass("fsx", "fsx.csi.aws.com", "WaitForFirstConsumer"),
    ]
    found = pod_volumes(
        pod("csi", "in-tree", "nfs", "dynamic", "fsx", "missing"), storage(*objects)
    )
    assert found == (
        ("ebs.csi.aws.com", frozenset({"ml/csi", "ml/in-tree", "ml/dynamic"})),
        ("fsx.csi.aws.com", frozenset({"ml/fsx"})),
    )


def csinode(count: int | None = 25) -> CSINode:
    return CSINode("ip-10-0-1-7", [CSINodeDriver("ebs.csi.aws.com", count)])


def ebs(*claims: str) -> v.Volumes:
    return (("ebs.csi.aws.com", frozenset(f"ml/{c}" for c in claims)),)


def on(name: str) -> Pod:
    return Pod(namespace=NS, name=name, uid=f"uid-{name}")


def test_a_nodes_ebs_attach_limit_counts_distinct_claims():
    usage = VolumeUsage(csi_limits(csinode(25)))
    for i in range(25):
        assert usage.exceeds_limits(ebs(f"c{i}")) is None
        usage.add(on(f"p{i}"), ebs(f"c{i}"))
    assert usage.exceeds_limits(ebs("c3")) is None  # a claim already attached costs nothing
    refused = usage.exceeds_limits(ebs("c25"))
    assert (refused.driver, refused.count, refused.limit) == ("ebs.csi.aws.com", 26, 25)
    assert str(refused) == (
        "would exceed volume limit (provisioner ebs.csi.aws.com: 26 volumes, limit 25)"
    )
    shared = (("efs.csi.aws.com", frozenset({"ml/shared"})),)
    assert usage.exceeds_limits(shared) is None  # no limit


def test_deciding_changes_nothing_and_removing_a_pod_frees_its_claims():
    usage = VolumeUsage({"ebs.csi.aws.com": 1})
    assert usage.exceeds_limits(ebs("a")) is None
    trial = usage.copy()
    trial.add(on("p0"), ebs("a"))
    assert usage.exceeds_limits(ebs("b")) is None and trial.exceeds_limits(ebs("b")) is not None
    trial.delete_pod("ml/p0")
    assert trial.exceeds_limits(ebs("b")) is None


def test_a_node_already_over_its_limit_refuses_every_pod():
    usage = VolumeUsage({"ebs.csi.aws.com": 1}, {"ml/p0": ebs("a", "b")})
    assert usage.exceeds_limits(()) is not None


def test_a_driver_stating_an_allocatable_without_a_count_allows_none():
    assert csi_limits(csinode(0)) == {"ebs.csi.aws.com": 0}
    assert csi_limits(csinode(None)) == {}
    assert csi_limits(None) == {}


def test_usage_of_a_node_counts_its_pods_claims():
    objects = [claim("c0", volume="pv-0"), pv("pv-0"), claim("c1", volume="pv-1"), pv("pv-1")]
    usage = usage_of(
        csinode(2), [pod("c0", name="a"), pod("c1", name="b"), pod(name="c")], storage(*objects)
    )
    assert usage.attached() == dict(ebs("c0", "c1"))
    assert usage.exceeds_limits(ebs("c2")).count == 3


def test_a_claim_written_without_a_class_gets_the_newest_default_class():
    from allocator.snapshot import load_files

    def sc(name: str, created: str, default: bool) -> str:
        note = '{storageclass.kubernetes.io/is-default-class: "true"}' if default else "{}"
        return (
            f"apiVersion: storage.k8s.io/v1\nkind: StorageClass\nmetadata: {{name: {name}, "
            f"creationTimestamp: '{created}', annotations: {note}}}\nprovisioner: ebs.csi.aws.com\n"
        )

    def pvc(name: str, spec: str) -> str:
        return f"apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata: {{name: {name}, namespace: ml}}\nspec: {spec}\n"

    text = "---\n".join(
        [
            sc("gp2", "2024-01-01T00:00:00Z", True),
            sc("gp3", "2025-06-01T00:00:00Z", True),
            sc("io2", "2026-01-01T00:00:00Z", False),
            pvc("unset", "{}"),
            pvc("disabled", '{storageClassName: ""}'),
            pvc("chosen", "{storageClassName: io2}"),
        ]
    )
    claims = Storage.of(load_files([("s.yaml", text)])).claims
    assert {k: c.storage_class_name for k, c in claims.items()} == {
        "ml/unset": "gp3",
        "ml/disabled": "",
        "ml/chosen": "io2",
    }
