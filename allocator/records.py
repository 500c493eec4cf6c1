"""``record``: the allocator's dataclasses, defined for a fraction of what ``@dataclass`` costs.

Python 3.11's ``dataclasses`` compiles every method it writes from source, one ``exec`` per
method: ``__init__``, ``__repr__``, ``__eq__``, ``__hash__`` and, for frozen classes,
``__setattr__`` and ``__delattr__``. The allocator defines about 180 dataclasses, and a
simulation's process spent about 70 ms of its 120 ms of imports writing them: a quarter of
a run of Karpenter's 1,000-pod benchmark. Python 3.13 compiles a class's methods in one go.

``record`` is ``dataclass(slots=True)``: the same fields, ``__init__``, frozen behaviour,
slots, ``fields``, ``replace`` and ``asdict``, with ``__repr__``, ``__eq__`` and ``__hash__``
as closures over the field names instead of compiled source. Each answers exactly what the
stdlib's answers (``tests/allocator/test_records.py`` compares them field for field): the
repr text, equality as tuple comparison of the compared fields (identity first, then ``==``),
the hash of the same tuple, ``NotImplemented`` for another class, and a class's own
``__repr__``, ``__eq__`` or ``__hash__`` kept as ``@dataclass`` keeps them.
"""

from __future__ import annotations

import dataclasses
import reprlib
from collections.abc import Callable
from operator import attrgetter
from typing import Any, TypeVar, dataclass_transform, overload

_T = TypeVar("_T", bound=type)


@overload
def record(cls: _T, /) -> _T: ...


@overload
def record(*, frozen: bool = False, eq: bool = True) -> Callable[[_T], _T]: ...


@dataclass_transform(eq_default=True, field_specifiers=(dataclasses.field, dataclasses.Field))
def record(cls=None, /, *, frozen: bool = False, eq: bool = True):
    """``@dataclass(slots=True, frozen=frozen, eq=eq)``, as ``@record`` or ``@record(...)``."""

    def wrap(cls: _T) -> _T:
        return _process(cls, frozen=frozen, eq=eq)

    return wrap if cls is None else wrap(cls)


def _process(cls: _T, *, frozen: bool, eq: bool) -> _T:
    own = cls.__dict__
    has_repr = "__repr__" in own
    has_eq = "__eq__" in own
    # As dataclasses decides whether a class brings its own hash: a class body that defines
    # __eq__ gets __hash__ = None from Python, which does not count.
    own_hash = own.get("__hash__", dataclasses.MISSING)
    has_hash = not (own_hash is dataclasses.MISSING or (own_hash is None and has_eq))
    cls = dataclasses.dataclass(cls, slots=True, frozen=frozen, repr=False, eq=False)
    fields = dataclasses.fields(cls)
    if not has_repr:
        _set(cls, _repr([f.name for f in fields if f.repr]))
    if eq:
        if not has_eq:
            _set(cls, _eq([f.name for f in fields if f.compare]))
        if frozen and not has_hash:
            hashed = [f.name for f in fields if (f.compare if f.hash is None else f.hash)]
            _set(cls, _hash(hashed))
        elif not has_hash:
            cls.__hash__ = None  # mutable and compared by value: unhashable
    return cls


def _set(cls: type, method: Callable) -> None:
    method.__qualname__ = f"{cls.__qualname__}.{method.__name__}"
    setattr(cls, method.__name__, method)


def _values(names: list[str]) -> Callable[[Any], tuple]:
    """The named attributes of an object as a tuple, read at C speed for several names
    (attrgetter gives one name's value bare: a one-field record's eq and hash, which dict
    lookups call, read it inline instead)."""
    if len(names) > 1:
        return attrgetter(*names)
    if names:
        only = attrgetter(names[0])
        return lambda obj: (only(obj),)
    return lambda obj: ()


def _repr(names: list[str]) -> Callable[[Any], str]:
    # One %-format of the values: about as fast as the f-string @dataclass compiles.
    shown = "(" + ", ".join(f"{name}=%r" for name in names) + ")"
    values = _values(names)

    @reprlib.recursive_repr()
    def __repr__(self: Any) -> str:
        return self.__class__.__qualname__ + shown % values(self)

    return __repr__


def _eq(names: list[str]) -> Callable[[Any, Any], Any]:
    # Tuples compared, as @dataclass compares them: identity first, then ==.
    if len(names) == 1:
        only = attrgetter(names[0])

        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return (only(self),) == (only(other),)
            return NotImplemented

    else:
        values = _values(names)

        def __eq__(self: Any, other: Any) -> Any:
            if other.__class__ is self.__class__:
                return values(self) == values(other)
            return NotImplemented

    return __eq__


def _hash(names: list[str]) -> Callable[[Any], int]:
    # The hash of the same tuple as @dataclass's: sets of records iterate alike.
    if len(names) == 1:
        only = attrgetter(names[0])

        def __hash__(self: Any) -> int:
            return hash((only(self),))

    else:
        values = _values(names)

        def __hash__(self: Any) -> int:
            return hash(values(self))

    return __hash__
