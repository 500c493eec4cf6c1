"""The loader's one error type (kept apart so decode, bounds and loader can all raise it)."""

from __future__ import annotations


class SnapshotError(ValueError):
    """An unusable snapshot; ``problems`` lists every problem found."""

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        count = len(self.problems)
        head = f"snapshot has {count} problem{'s' if count != 1 else ''}"
        super().__init__(head + ":\n" + "\n".join(f"  {p}" for p in self.problems))


class BoundError(SnapshotError):
    """Input over one of the size bounds of ``allocator.snapshot.bounds``; ``bound`` names it
    (``MAX_DEPTH``, ``MAX_STRING_CHARS``, ...). Callers refuse the whole input (HTTP 400, CLI
    exit 2) and store nothing."""

    def __init__(self, problem: str, bound: str) -> None:
        self.bound = bound
        super().__init__([problem])
