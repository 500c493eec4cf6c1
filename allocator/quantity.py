"""Kubernetes ``resource.Quantity``: parsing, exact arithmetic and canonical printing.

Values are kept exact as ``fractions.Fraction``. Parsing follows apimachinery's
``ParseQuantity``: a signed decimal number, then a suffix that is decimal SI (``n u m "" k M G
T P E``), binary SI (``Ki Mi Gi Ti Pi Ei``) or a decimal exponent (``e3``, ``E-2``). Parsed
values are rounded up (away from zero) to nano precision and BinarySI values are capped at
2^63-1, as Kubernetes does. Printing follows ``CanonicalizeBytes``: BinarySI stays binary only
when the value is an integer of magnitude >= 1024, otherwise the decimal form is used with the
largest suffix that keeps the mantissa an integer (``1500m``, ``1536Mi``, ``1k``).

Sizes are bounded before any arithmetic, so ``1e99999999`` is refused at once instead of
building a hundred-million-digit number: at most ``MAX_QUANTITY_CHARS`` characters,
``MAX_QUANTITY_DIGITS`` digits and a decimal exponent within ``±MAX_QUANTITY_EXPONENT``.
Kubernetes bounds the same parts (its exponent must parse as an integer and is kept in an
int32 scale, and values past int64 leave its fast path); these bounds are tighter because
exact Python fractions, unlike inf.Dec's lazy scale, grow with the exponent.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

from allocator.records import record

DECIMAL_SI = "DecimalSI"
BINARY_SI = "BinarySI"
DECIMAL_EXPONENT = "DecimalExponent"
FORMATS = (DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT)

MAX_QUANTITY_CHARS = 100
MAX_QUANTITY_DIGITS = 64
MAX_QUANTITY_EXPONENT = 64

_INT64_MAX = (1 << 63) - 1
_INT64_MIN = -(1 << 63)
_NANO = Fraction(1, 10**9)
_INT_DIGITS_LIMIT = 10**MAX_QUANTITY_DIGITS

_DECIMAL_SUFFIXES = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12}
_DECIMAL_SUFFIXES.update({"P": 15, "E": 18})
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_BY_EXPONENT = {e: s for s, e in _DECIMAL_SUFFIXES.items()}
_BINARY_BY_EXPONENT = {e // 10: s for s, e in _BINARY_SUFFIXES.items()}
_DIGITS = frozenset("0123456789")
_SUFFIX_CHARS = frozenset("eEinumkKMGTP")


class QuantityError(ValueError):
    """A string that is not a Kubernetes quantity, or an impossible operation on one."""


def _round_up_nano(value: Fraction) -> Fraction:
    """Round the magnitude up to a multiple of 1n (Kubernetes rounds requests up, never to 0)."""
    if value.denominator == 1 or (10**9) % value.denominator == 0:
        return value
    scaled = value / _NANO
    magnitude = math.ceil(abs(scaled))
    return Fraction(magnitude if value > 0 else -magnitude, 10**9)


def _split(text: str) -> tuple[bool, str, str, str]:
    """Split ``text`` into (positive, integer digits, fraction digits, suffix)."""
    pos, end = 0, len(text)
    positive = True
    if pos < end and text[pos] in "+-":
        positive = text[pos] == "+"
        pos += 1
    start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    whole = text[start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        frac = text[start:pos]
    if not whole and not frac:
        raise QuantityError(f"quantity {text!r}: missing numeric part")
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos != end:
        raise QuantityError(
            f"quantity {text!r}: unexpected character {text[pos]!r}; quantities look like "
            "'100m', '1.5Gi', '2', '1e3'"
        )
    return positive, whole or "0", frac, text[suffix_start:]


def _interpret_suffix(text: str, suffix: str) -> tuple[int, int, str]:
    """Return (base, exponent, format) of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if body and all(c in _DIGITS for c in body):
            exponent = int(digits) if len(body) <= 6 else MAX_QUANTITY_EXPONENT + 1
            if abs(exponent) > MAX_QUANTITY_EXPONENT:
                raise QuantityError(
                    f"quantity {text!r}: exponent {digits} out of range "
                    f"(at most {MAX_QUANTITY_EXPONENT} either way)"
                )
            return 10, exponent, DECIMAL_EXPONENT
    raise QuantityError(
        f"quantity {text!r}: unknown suffix {suffix!r}; use one of n u m k M G T P E, "
        "Ki Mi Gi Ti Pi Ei, or an exponent like e3"
    )


@record(frozen=True, eq=False)
class Quantity:
    """An exact quantity; ``format`` only steers canonical printing, never comparisons."""

    value: Fraction
    format: str = DECIMAL_SI

    # --- construction ----------------------------------------------------------------------

    @classmethod
    def parse(cls, s: str | int | float | Quantity) -> Quantity:
        if isinstance(s, Quantity):
            return s
        if isinstance(s, bool):
            raise QuantityError(f"quantity {s!r}: a boolean is not a quantity")
        if isinstance(s, int):
            if not -_INT_DIGITS_LIMIT < s < _INT_DIGITS_LIMIT:
                raise QuantityError(f"quantity: more than {MAX_QUANTITY_DIGITS} digits")
            return cls(Fraction(s), DECIMAL_SI)
        if isinstance(s, float):
            if not math.isfinite(s):
                raise QuantityError(f"quantity {s!r}: must be a finite number")
            s = repr(s)
        if not isinstance(s, str):
            raise QuantityError(
                f"quantity {s!r}: must be a string or a number, not {type(s).__name__}"
            )
        return _parse_text(s)

    @classmethod
    def zero(cls, format: str = DECIMAL_SI) -> Quantity:
        return cls(Fraction(0), format)

    # --- arithmetic --------------------------------------------------------------------------

    def _coerce(self, other: object) -> Fraction | None:
        if isinstance(other, Quantity):
            return other.value
        if isinstance(other, bool):
            return None
        if isinstance(other, int | Fraction):
            return Fraction(other)
        return None

    def __add__(self, other: object) -> Quantity:
        if isinstance(other, Quantity):
            # Like Quantity.Add: a zero receiver takes the addend's format.
            fmt = other.format if self.value == 0 else self.format
            return Quantity(self.value + other.value, fmt)
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return Quantity(self.value + value, self.format)

    def __radd__(self, other: object) -> Quantity:
        # sum() starts from int 0.
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return Quantity(value + self.value, self.format)

    def __sub__(self, other: object) -> Quantity:
        if isinstance(other, Quantity):
            fmt = other.format if self.value == 0 else self.format
            return Quantity(self.value - other.value, fmt)
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return Quantity(self.value - value, self.format)

    def __rsub__(self, other: object) -> Quantity:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return Quantity(value - self.value, self.format)

    def __neg__(self) -> Quantity:
        return Quantity(-self.value, self.format)

    def __abs__(self) -> Quantity:
        return Quantity(abs(self.value), self.format)

    def __mul__(self, other: object) -> Quantity:
        if isinstance(other, bool) or not isinstance(other, int | Fraction):
            return NotImplemented
        return Quantity(self.value * other, self.format)

    __rmul__ = __mul__

    def __bool__(self) -> bool:
        return self.value != 0

    # --- comparisons (by value only) ---------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return self.value == value

    def __hash__(self) -> int:
        return hash(self.value)

    def __lt__(self, other: object) -> bool:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return self.value < value

    def __le__(self, other: object) -> bool:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return self.value <= value

    def __gt__(self, other: object) -> bool:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return self.value > value

    def __ge__(self, other: object) -> bool:
        value = self._coerce(other)
        if value is None:
            return NotImplemented
        return self.value >= value

    # --- conversions -------------------------------------------------------------------------

    def is_integer(self) -> bool:
        return self.value.denominator == 1

    def as_int(self) -> int | None:
        if self.value.denominator != 1:
            return None
        n = self.value.numerator
        if n > _INT64_MAX or n < _INT64_MIN:
            return None
        return n

    def as_float(self) -> float:
        return float(self.value)

    def sign(self) -> int:
        return (self.value > 0) - (self.value < 0)

    def milli_value(self) -> int:
        """Value in thousandths, rounded up away from zero like Kubernetes' MilliValue."""
        value = self.value
        denominator = value.denominator
        if denominator == 1:  # most quantities ("8", "64Gi"): no Fraction math
            return value.numerator * 1000
        if 1000 % denominator == 0:  # "500m", "1.5": whole thousandths, exactly
            return value.numerator * (1000 // denominator)
        scaled = value * 1000
        magnitude = math.ceil(abs(scaled))
        return magnitude if scaled >= 0 else -magnitude

    def value_ceil(self) -> int:
        """Integer value rounded up away from zero like Kubernetes' Value()."""
        magnitude = math.ceil(abs(self.value))
        return magnitude if self.value >= 0 else -magnitude

    # --- canonical printing ------------------------------------------------------------------

    def canonical(self) -> str:
        return _canonical(self.value, self.format)

    def __str__(self) -> str:
        return self.canonical()

    def __repr__(self) -> str:
        return f"Quantity({self.canonical()!r})"

    def to_json(self) -> str:
        return self.canonical()


@lru_cache(maxsize=8192)
def _canonical(exact: Fraction, fmt_in: str) -> str:
    """Kubernetes' canonical text of a quantity. Printed again and again (a result lists the
    requests of every pod and the resources of every NodeClaim, a repeated pod's shape names
    its requests): a few hundred distinct values, each worked out once."""
    value = _round_up_nano(exact)  # a multiple of 1n: its denominator divides 10**9
    return canonical_nanos(value.numerator * (10**9 // value.denominator), fmt_in)


def canonical_milli(milli: int, fmt: str) -> str:
    """The canonical text of ``milli`` thousandths, without building a Quantity: the
    scheduler words resources it counts in milli-units (a NodeClaim's report words those of
    hundreds of instance types, nearly all distinct)."""
    return canonical_nanos(milli * 1_000_000, fmt)


def canonical_nanos(nanos: int, fmt_in: str) -> str:
    """Kubernetes' canonical text of ``nanos`` billionths in the format ``fmt_in``."""
    if nanos == 0:
        return "0"
    fmt = fmt_in if fmt_in in FORMATS else DECIMAL_EXPONENT
    sign = "-" if nanos < 0 else ""
    magnitude = -nanos if nanos < 0 else nanos
    if fmt == BINARY_SI and (magnitude < 1024 * 10**9 or magnitude % 10**9):
        fmt = DECIMAL_SI  # a binary suffix only for whole values of 1024 and more
    if fmt == BINARY_SI:
        number = magnitude // 10**9
        exponent = 0
        while exponent < 6 and number % 1024 == 0:
            number //= 1024
            exponent += 1
        return f"{sign}{number}{_BINARY_BY_EXPONENT.get(exponent, '')}"
    # Decimal: mantissa * 10**exponent with the exponent a multiple of 3, as large as
    # possible while the mantissa stays an integer.
    number = magnitude
    exponent = -9
    while number % 10 == 0:
        number //= 10
        exponent += 1
    shift = exponent % 3
    number *= 10**shift
    exponent -= shift
    if fmt == DECIMAL_EXPONENT:
        suffix = f"e{exponent}" if exponent else ""
        return f"{sign}{number}{suffix}"
    if exponent > 18:
        number *= 10 ** (exponent - 18)
        exponent = 18
    return f"{sign}{number}{_DECIMAL_BY_EXPONENT[exponent]}"


@lru_cache(maxsize=65536)
def _parse_text(s: str) -> Quantity:
    # Quantities repeat massively in snapshots ("80Gi" on every GPU); Quantity is immutable,
    # so parsed values are shared.
    text = s.strip()
    if not text:
        raise QuantityError("quantity '': empty string")
    if len(text) > MAX_QUANTITY_CHARS:
        raise QuantityError(
            f"quantity {text[:20]!r}...: longer than {MAX_QUANTITY_CHARS} characters"
        )
    if text == "0":
        return Quantity(Fraction(0), DECIMAL_SI)
    positive, whole, frac, suffix = _split(text)
    base, exponent, fmt = _interpret_suffix(text, suffix)
    if len(whole.lstrip("0")) + len(frac) > MAX_QUANTITY_DIGITS:
        raise QuantityError(f"quantity {text!r}: more than {MAX_QUANTITY_DIGITS} digits")
    mantissa = int(whole + frac)
    if not positive:
        mantissa = -mantissa
    if base == 10:
        shift = exponent - len(frac)
        if shift >= 0:
            value = Fraction(mantissa * 10**shift)
        else:
            value = Fraction(mantissa, 10**-shift)
    else:
        value = Fraction(mantissa << exponent, 10 ** len(frac))
    value = _round_up_nano(value)
    if fmt == BINARY_SI:
        if value > _INT64_MAX:
            value = Fraction(_INT64_MAX)
        elif value < -_INT64_MAX:
            value = Fraction(-_INT64_MAX)
        if 0 < value < 1:
            fmt = DECIMAL_SI
    return Quantity(value, fmt)


def parse_quantity(s: str | int | float | Quantity) -> Quantity:
    return Quantity.parse(s)
