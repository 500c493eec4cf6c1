"""``record`` answers what ``@dataclass(slots=True)`` answers: the same repr, equality, hash,
frozen behaviour and dataclass functions, for classes shaped like the allocator's."""

from __future__ import annotations

import copy
import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.model import DeviceRequest, Version
from allocator.records import record

# Field values as the allocator holds them: names, counts, NaN (equal to itself only as the
# same object inside a tuple), nested tuples, None.
values = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.sampled_from(["gpu.nvidia.com", "a100", "us-east-1a", ""]),
    st.just(float("nan")),
    st.tuples(st.integers(0, 3), st.sampled_from(["x", "y"])),
)


def _pair(frozen: bool, eq: bool):
    """The same class body through ``record`` and through ``@dataclass(slots=True)``."""

    def body(cls_name):
        namespace = {
            "__annotations__": {"driver": "str", "count": "int", "extra": "object"},
            "count": 1,
            "extra": field(default=None, compare=False, repr=False),
            "__module__": __name__,
        }
        return type(cls_name, (), namespace)

    fast = record(frozen=frozen, eq=eq)(body("Claim"))
    plain = dataclass(slots=True, frozen=frozen, eq=eq)(body("Claim"))
    return fast, plain


@pytest.mark.parametrize("frozen", [False, True])
@pytest.mark.parametrize("eq", [True, False])
@given(a=st.tuples(values, values, values), b=st.tuples(values, values, values))
def test_record_answers_as_dataclass_does(frozen, eq, a, b):
    fast, plain = _pair(frozen, eq)
    fa, fb, pa, pb = fast(*a), fast(*b), plain(*a), plain(*b)
    assert repr(fa) == repr(pa)
    assert (fa == fb) == (pa == pb)
    assert (fa != fb) == (pa != pb)
    assert (fa == fa) == (pa == pa)
    assert fa.__eq__(object()) is NotImplemented or not eq
    if plain.__hash__ is None:
        assert fast.__hash__ is None
    elif frozen and eq:
        assert hash(fa) == hash(pa)
    assert [f.name for f in dataclasses.fields(fast)] == [f.name for f in dataclasses.fields(plain)]
    assert dataclasses.asdict(fa) == dataclasses.asdict(pa)
    assert repr(dataclasses.replace(fa, count=7)) == repr(dataclasses.replace(pa, count=7))


@record
class Placement:
    pod: str
    node: str = ""


@record(frozen=True)
class Allocated:
    driver: str
    device: str


@pytest.mark.parametrize("frozen", [False, True])
@given(a=values, b=values)
def test_a_one_field_record_answers_as_dataclass_does(frozen, a, b):
    # One field reads through its own closures (no tuple of several): the same answers.
    def body(cls_name):
        return type(cls_name, (), {"__annotations__": {"value": "object"}, "__module__": __name__})

    fast = record(frozen=frozen)(body("Version"))
    plain = dataclass(slots=True, frozen=frozen)(body("Version"))
    fa, fb, pa, pb = fast(a), fast(b), plain(a), plain(b)
    assert repr(fa) == repr(pa)
    assert (fa == fb) == (pa == pb)
    assert (fa == fa) == (pa == pa)  # NaN: equal to itself as the same object in a tuple
    if frozen:
        assert hash(fa) == hash(pa)


@pytest.mark.parametrize("frozen", [False, True])
def test_a_record_has_slots_and_freezes_as_a_dataclass_does(frozen):
    fast, plain = _pair(frozen, eq=True)
    assert fast.__slots__ == plain.__slots__
    claim = fast("gpu.nvidia.com", 2)
    assert not hasattr(claim, "__dict__")
    if frozen:
        with pytest.raises(dataclasses.FrozenInstanceError):
            claim.count = 3
    else:
        claim.count = 3
        assert claim.count == 3
    assert copy.copy(claim) == claim


@pytest.mark.parametrize(
    "kept", [Placement("default/train-0", "ip-10-0-1-5"), Allocated("gpu.nvidia.com", "gpu-3")]
)
def test_a_record_survives_pickling(kept):
    assert pickle.loads(pickle.dumps(kept)) == kept


def test_a_class_that_brings_its_own_methods_keeps_them():
    @record(frozen=True)
    class Named:
        name: str

        def __repr__(self) -> str:
            return f"<{self.name}>"

        def __eq__(self, other):
            return isinstance(other, Named) and other.name.lower() == self.name.lower()

    @dataclass(slots=True, frozen=True)
    class NamedPlain:
        name: str

        def __eq__(self, other):
            return isinstance(other, NamedPlain) and other.name.lower() == self.name.lower()

    assert repr(Named("A100")) == "<A100>"
    assert Named("A100") == Named("a100")
    # A body defining __eq__ without __hash__ still gets the fields' hash, as from @dataclass.
    assert hash(Named("x")) == hash(("x",)) == hash(NamedPlain("x"))


def test_a_recursive_repr_stops_as_a_dataclass_does():
    @record
    class Node:
        child: object = None

    @dataclass(slots=True)
    class Plain:
        child: object = None

    node, plain = Node(), Plain()
    node.child, plain.child = node, plain
    assert repr(node).replace("Node", "X") == repr(plain).replace("Plain", "X")


def test_a_subclass_compares_its_own_fields():
    @record(frozen=True)
    class Base:
        driver: str

    @record(frozen=True)
    class Sub(Base):
        pool: str

    assert Sub("gpu.nvidia.com", "node-1") != Sub("gpu.nvidia.com", "node-2")
    assert Sub("gpu.nvidia.com", "node-1") != Base("gpu.nvidia.com")
    assert repr(Sub("d", "p")).endswith("Sub(driver='d', pool='p')")


def test_the_allocators_records_are_the_dataclasses_they_were():
    assert Version("1.2.3") == Version("1.2.3")
    assert hash(Version("1.2.3")) == hash(("1.2.3",))
    assert repr(Version("1.2.3")) == "Version(value='1.2.3')"
    assert dataclasses.is_dataclass(DeviceRequest)
    assert DeviceRequest.__hash__ is None  # mutable and compared by value
    assert DeviceRequest.__eq__.__qualname__ == "DeviceRequest.__eq__"
