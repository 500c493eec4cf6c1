import math
import time
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from allocator.quantity import (
    BINARY_SI,
    DECIMAL_EXPONENT,
    DECIMAL_SI,
    Quantity,
    QuantityError,
    canonical_milli,
    parse_quantity,
)


@pytest.mark.parametrize(
    ("text", "value", "fmt"),
    [
        ("100m", Fraction(1, 10), DECIMAL_SI),
        ("1Gi", Fraction(2**30), BINARY_SI),
        ("1.5Gi", Fraction(3 * 2**29), BINARY_SI),
        ("80Gi", Fraction(80 * 2**30), BINARY_SI),
        ("1e3", Fraction(1000), DECIMAL_EXPONENT),
        ("1E3", Fraction(1000), DECIMAL_EXPONENT),
        ("1E", Fraction(10**18), DECIMAL_SI),
        ("1.5", Fraction(3, 2), DECIMAL_SI),
        ("-2k", Fraction(-2000), DECIMAL_SI),
        ("+7", Fraction(7), DECIMAL_SI),
        (".5", Fraction(1, 2), DECIMAL_SI),
        ("250n", Fraction(250, 10**9), DECIMAL_SI),
        ("3u", Fraction(3, 10**6), DECIMAL_SI),
        ("2T", Fraction(2 * 10**12), DECIMAL_SI),
        ("4P", Fraction(4 * 10**15), DECIMAL_SI),
        ("1Ti", Fraction(2**40), BINARY_SI),
        ("1Pi", Fraction(2**50), BINARY_SI),
        ("1Ei", Fraction(2**60), BINARY_SI),
        ("12Mi", Fraction(12 * 2**20), BINARY_SI),
        ("0", Fraction(0), DECIMAL_SI),
    ],
)
def test_parse(text, value, fmt):
    q = Quantity.parse(text)
    assert q.value == value
    assert q.format == fmt


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("1500m", "1500m"),
        ("1.5", "1500m"),
        ("1000", "1k"),
        ("1000m", "1"),
        ("1536Mi", "1536Mi"),
        ("1.5Gi", "1536Mi"),
        ("1024Mi", "1Gi"),
        ("1024", "1024"),  # DecimalSI stays decimal
        ("1023Ki", "1023Ki"),
        ("0.1Ki", "102400m"),  # BinarySI below 1024 prints as DecimalSI
        ("512", "512"),
        ("1e3", "1e3"),
        ("1.5e-3", "1500e-6"),
        ("12e6", "12e6"),
        ("1e-10", "1e-9"),  # rounded up to nano precision
        ("0.0000000001", "1n"),
        ("-0.0000000001", "-1n"),  # rounded away from zero
        ("0.0001m", "100n"),
        ("-1Ki", "-1Ki"),
        ("-1500m", "-1500m"),
        ("9Ei", "9223372036854775807"),  # BinarySI capped at int64 max
        ("1000E", "1000E"),
        ("0", "0"),
        ("0Gi", "0"),
        ("2000000", "2M"),
        ("40G", "40G"),
    ],
)
def test_canonical(text, canonical):
    assert Quantity.parse(text).canonical() == canonical
    assert str(Quantity.parse(text)) == canonical


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("", "empty"),
        ("abc", "missing numeric part"),
        ("+", "missing numeric part"),
        ("1K", "unknown suffix 'K'"),
        ("1Kii", "unknown suffix"),
        ("1e", "unknown suffix 'e'"),
        ("1 Gi", "unexpected character"),
        ("1Gi2", "unknown suffix"),
        ("1.2.3", "unexpected character"),
    ],
)
def test_parse_errors(text, fragment):
    with pytest.raises(QuantityError) as err:
        Quantity.parse(text)
    assert fragment in str(err.value)
    assert repr(text) in str(err.value)


def test_numbers_and_non_strings():
    assert Quantity.parse(5) == Quantity.parse("5")
    assert Quantity.parse(0.5) == Quantity.parse("500m")
    assert Quantity.parse(1e-5).canonical() == "10e-6"
    with pytest.raises(QuantityError):
        Quantity.parse(True)
    with pytest.raises(QuantityError):
        Quantity.parse(float("inf"))
    with pytest.raises(QuantityError):
        Quantity.parse(["1"])  # type: ignore[arg-type]
    assert parse_quantity("2Gi") == Quantity.parse("2048Mi")


def test_arithmetic_is_exact():
    gpu_mem = Quantity.parse("80Gi")
    slice_mem = Quantity.parse("10Gi")
    assert gpu_mem - slice_mem * 7 == Quantity.parse("10Gi")
    assert (gpu_mem - slice_mem * 7).canonical() == "10Gi"
    assert sum([Quantity.parse("100m")] * 3) == Quantity.parse("300m")
    assert (Quantity.parse("100m") + Quantity.parse("200m")).canonical() == "300m"
    assert (-Quantity.parse("1Gi")).canonical() == "-1Gi"
    assert Quantity.parse("1Gi") * Fraction(1, 2) == Quantity.parse("512Mi")
    # A zero receiver takes the addend's format, like Quantity.Add.
    assert (Quantity.zero() + Quantity.parse("1Gi")).canonical() == "1Gi"
    assert (Quantity.parse("1Gi") + Quantity.parse("1G")).format == BINARY_SI


def test_comparisons_and_conversions():
    assert Quantity.parse("1Gi") > Quantity.parse("1G")
    assert Quantity.parse("1000m") == Quantity.parse("1")
    assert Quantity.parse("1000m") == 1
    assert hash(Quantity.parse("1k")) == hash(Quantity.parse("1000"))
    assert Quantity.parse("1.5").as_int() is None
    assert Quantity.parse("2Gi").as_int() == 2 * 2**30
    assert Quantity.parse("1000E").as_int() is None  # overflows int64
    assert Quantity.parse("1.5").as_float() == 1.5
    assert Quantity.parse("1.5").milli_value() == 1500
    assert Quantity.parse("1n").milli_value() == 1  # rounds up like MilliValue
    assert Quantity.parse("-1n").milli_value() == -1
    assert Quantity.parse("1500m").value_ceil() == 2
    assert Quantity.parse("-3").sign() == -1
    assert Quantity.parse("0").sign() == 0
    assert not Quantity.parse("0")
    assert Quantity.parse("1.5").is_integer() is False


nano_values = st.integers(min_value=-(10**24), max_value=10**24).map(lambda n: Fraction(n, 10**9))
formats = st.sampled_from([DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT])


@given(nano_values, formats)
def test_round_trip(value, fmt):
    q = Quantity(value, fmt)
    assert Quantity.parse(str(q)) == q


@given(
    st.integers(min_value=-(2**40), max_value=2**40),
    st.sampled_from(["", "k", "M", "G", "m", "u", "n", "Ki", "Mi", "Gi", "Ti"]),
)
def test_round_trip_from_text(n, suffix):
    q = Quantity.parse(f"{n}{suffix}")
    again = Quantity.parse(q.canonical())
    assert again == q
    # Canonical form is a fixed point.
    assert again.canonical() == q.canonical()


@pytest.mark.parametrize(
    ("milli", "fmt", "text"),
    [
        (1500, DECIMAL_SI, "1500m"),  # a request of one and a half CPUs
        (95_150, DECIMAL_SI, "95150m"),
        (4_000_000, DECIMAL_SI, "4k"),
        (110_000, DECIMAL_SI, "110"),  # pods
        (80 * 2**30 * 1000, BINARY_SI, "80Gi"),  # an H100's memory
        (1_000_000, BINARY_SI, "1k"),  # 1000 bytes: below 1024, decimal
        (1_023_000, BINARY_SI, "1023"),
        (1500, BINARY_SI, "1500m"),  # not whole: decimal
        (-(2**20) * 1000, BINARY_SI, "-1Mi"),
        (0, BINARY_SI, "0"),
    ],
)
def test_canonical_milli_words_what_the_scheduler_counts(milli, fmt, text):
    assert canonical_milli(milli, fmt) == text


@given(st.integers(min_value=-(10**18), max_value=10**18), st.sampled_from([DECIMAL_SI, BINARY_SI]))
def test_canonical_milli_is_the_quantitys_canonical_text(milli, fmt):
    # The scheduler words milli-units without building a Quantity; the words must be those
    # of the Quantity, and read back as the same value.
    text = canonical_milli(milli, fmt)
    assert text == Quantity(Fraction(milli, 1000), fmt).canonical()
    assert Quantity.parse(text).milli_value() == milli


@given(nano_values)
def test_milli_value_rounds_up_away_from_zero_as_kubernetes_does(value):
    # Whole thousandths ("500m", "1.5") are read without Fraction arithmetic; every value
    # gives Kubernetes' MilliValue all the same: ceil(|value| * 1000), with the sign.
    magnitude = math.ceil(abs(value) * 1000)
    assert Quantity(value, DECIMAL_SI).milli_value() == (magnitude if value >= 0 else -magnitude)


@given(nano_values, nano_values)
def test_ordering_matches_fraction(a, b):
    qa, qb = Quantity(a), Quantity(b)
    assert (qa < qb) == (a < b)
    assert (qa <= qb) == (a <= b)
    assert (qa == qb) == (a == b)
    assert (qa + qb).value == a + b
    assert (qa - qb).value == a - b


# --- bounds: hostile quantities are refused, not computed ------------------------------------


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1e99999999", "exponent 99999999 out of range"),
        ("1e-99999999", "exponent -99999999 out of range"),
        ("1E65", "exponent 65 out of range"),
        ("1e9999999999999999999999", "out of range"),
        ("9" * 65, "more than 64 digits"),
        ("0." + "1" * 65, "more than 64 digits"),
        ("1" * 101, "longer than 100 characters"),
        (10**64, "more than 64 digits"),
        (1e300, "out of range"),
    ],
)
def test_quantities_past_the_bounds_are_refused_at_once(text, why):
    """Kubernetes keeps a quantity's exponent in an int32 scale; exact fractions grow with
    it, so 1e99999999 hung the parser. Bounded exponent and digits are refused instead."""
    started = time.monotonic()
    with pytest.raises(QuantityError, match=why):
        Quantity.parse(text)
    assert time.monotonic() - started < 0.5


@pytest.mark.parametrize(
    ("text", "canonical"),
    [("1e64", "10e63"), ("1e-64", "1e-9"), ("9" * 64, "9" * 64), ("7Ei", "7Ei"), ("1E", "1E")],
)
def test_quantities_within_the_bounds_still_parse(text, canonical):
    assert Quantity.parse(text).canonical() == canonical


def test_a_snapshot_with_a_huge_exponent_says_invalid_quantity():
    from allocator.snapshot import SnapshotError, load_files

    doc = "apiVersion: v1\nkind: Node\nmetadata: {name: n1}\nstatus: {allocatable: {cpu: 1e99999999}}\n"
    with pytest.raises(SnapshotError) as err:
        load_files([("n.yaml", doc)])
    assert err.value.problems == [
        "n.yaml doc 1 Node n1: status.allocatable.cpu: invalid quantity: quantity '1e99999999': "
        "exponent 99999999 out of range (at most 64 either way)"
    ]
