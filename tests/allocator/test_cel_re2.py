"""The weakest part of the own CEL engine: RE2 patterns (``matches()``) run on Python's ``re``.
Each case is where the two engines differ and the translation must give RE2's (Go's
``regexp``) answer, as Kubernetes' CEL library does."""

from __future__ import annotations

import pytest

from allocator.cel.runtime import compile_regex


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        # "$" is the end of the text (Python's also matches before a final newline).
        ("^gpu$", "gpu\n", False),
        ("(?m)^gpu$", "gpu\nnic", True),
        # \d and \w are ASCII in RE2 (Python's str patterns are Unicode).
        (r"^\d+$", "\u0663", False),
        (r"^\w$", "\u00e9", False),
        # POSIX and Unicode classes, which Python's re lacks.
        (r"^[[:digit:]]+$", "42", True),
        (r"^\pL+$", "\u00e9t\u00e9", True),
        # \z (end of text) and \Q...\E (literal text).
        (r"H100\z", "NVIDIA H100", True),
        (r"^\Qa.b\E$", "a.b", True),
        (r"^\Qa.b\E$", "axb", False),
        ("(?i)^nvidia", "NVIDIA H100", True),
    ],
)
def test_rE2_semantics_survive_the_translation(pattern, text, matches):
    assert bool(compile_regex(pattern).search(text)) is matches


@pytest.mark.parametrize(
    ("pattern", "complaint"),
    [
        (r"(a)\1", "invalid escape sequence"),  # no backreferences in RE2
        ("(?<=a)b", "invalid or unsupported Perl syntax"),  # no lookbehind
        ("(?=x)", "invalid or unsupported Perl syntax"),  # no lookahead
        ("a++", "invalid nested repetition operator"),  # no possessive quantifiers
        ("[a-", "missing closing ]: `[a-`"),
    ],
)
def test_what_rE2_refuses_is_refused_with_its_words(pattern, complaint):
    with pytest.raises(ValueError, match="error parsing regexp") as err:
        compile_regex(pattern)
    assert complaint in str(err.value)


@pytest.mark.parametrize(
    ("pattern", "words"),
    [
        ("gpu-[0-9", "error parsing regexp: missing closing ]: `[0-9`"),
        ("(H100|A100", "error parsing regexp: missing closing ): `(H100|A100`"),
        ("H100)", "error parsing regexp: unexpected ): `H100)`"),
    ],
)
def test_unclosed_classes_and_groups_are_worded_as_go_words_them(pattern, words):
    with pytest.raises(ValueError) as err:
        compile_regex(pattern)
    assert str(err.value) == words
