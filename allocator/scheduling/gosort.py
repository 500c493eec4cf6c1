"""Go's ``sort.Slice``, step for step, so that elements that compare equal end up where
Karpenter's scheduler leaves them (docs/SIMULATION.md: the NodeClaims of a run are re-sorted in
place by pod count before each pod).

``sort.Slice`` is pattern-defeating quicksort (Go's ``pdqsort_func``): insertion sort for 12
elements or fewer, otherwise quicksort with median-of-three / ninther pivots, a partial insertion
sort for runs that look sorted, a partition that sets equal elements apart, pattern breaking
with a xorshift generator seeded by the slice length (so deterministic), and heapsort after too
many unbalanced partitions. It is not stable: which of several equal elements comes first
depends on every comparison and swap, so the algorithm is reproduced exactly, operation by
operation, on a Python list.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import compress, count, islice, repeat
from operator import ge, le, lt
from typing import TypeVar

T = TypeVar("T")

_MAX_INSERTION = 12
_INCREASING, _DECREASING, _UNKNOWN = 1, 2, 0
_MASK64 = (1 << 64) - 1


def slice_sort(items: list[T], less: Callable[[T, T], bool]) -> None:
    """Sort ``items`` in place exactly as Go's ``sort.Slice(items, less)`` does."""
    n = len(items)
    _Sorter(items, less).pdqsort(0, n, n.bit_length())


def slice_sort_by_key(items: list[T], keys: list) -> None:
    """``slice_sort(items, less)`` for ``less(x, y) = key(x) < key(y)``, given ``keys[i]`` =
    ``key(items[i])`` (permuted alongside): the same order, without a call per comparison,
    and the ascending runs of a nearly sorted slice are scanned at C speed (the scheduler
    sorts NodeClaims that are all in order but one or two, before every pod)."""
    n = len(items)
    _KeyedSorter(items, keys).pdqsort(0, n, n.bit_length())


class _Sorter:
    __slots__ = ("items", "less_items")

    def __init__(self, items: list, less: Callable) -> None:
        self.items = items
        self.less_items = less

    # Go's lessSwap over indices.
    def less(self, i: int, j: int) -> bool:
        items = self.items
        return self.less_items(items[i], items[j])

    def swap(self, i: int, j: int) -> None:
        items = self.items
        items[i], items[j] = items[j], items[i]

    def insertion_sort(self, a: int, b: int) -> None:
        for i in range(a + 1, b):
            j = i
            while j > a and self.less(j, j - 1):
                self.swap(j, j - 1)
                j -= 1

    def sift_down(self, lo: int, hi: int, first: int) -> None:
        root = lo
        while True:
            child = 2 * root + 1
            if child >= hi:
                return
            if child + 1 < hi and self.less(first + child, first + child + 1):
                child += 1
            if not self.less(first + root, first + child):
                return
            self.swap(first + root, first + child)
            root = child

    def heap_sort(self, a: int, b: int) -> None:
        first, lo, hi = a, 0, b - a
        for i in range((hi - 1) // 2, -1, -1):
            self.sift_down(i, hi, first)
        for i in range(hi - 1, -1, -1):
            self.swap(first, first + i)
            self.sift_down(lo, i, first)

    def pdqsort(self, a: int, b: int, limit: int) -> None:
        was_balanced = True  # whether the last partitioning was reasonably balanced
        was_partitioned = True  # whether the slice was already partitioned
        while True:
            length = b - a
            if length <= _MAX_INSERTION:
                self.insertion_sort(a, b)
                return
            if limit == 0:  # too many bad pivots
                self.heap_sort(a, b)
                return
            if not was_balanced:
                self.break_patterns(a, b)
                limit -= 1
            pivot, hint = self.choose_pivot(a, b)
            if hint == _DECREASING:
                self.reverse_range(a, b)
                pivot = (b - 1) - (pivot - a)
                hint = _INCREASING
            likely_sorted = was_balanced and was_partitioned and hint == _INCREASING
            if likely_sorted and self.partial_insertion_sort(a, b):
                return
            if a > 0 and not self.less(a - 1, pivot):
                # Many elements equal to the one before this range: set them apart.
                a = self.partition_equal(a, b, pivot)
                continue
            mid, was_partitioned = self.partition(a, b, pivot)
            left, right = mid - a, b - mid
            threshold = length // 8
            if left < right:
                was_balanced = left >= threshold
                self.pdqsort(a, mid, limit)
                a = mid + 1
            else:
                was_balanced = right >= threshold
                self.pdqsort(mid + 1, b, limit)
                b = mid

    def partition(self, a: int, b: int, pivot: int) -> tuple[int, bool]:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while i <= j and self.less(i, a):
            i += 1
        while i <= j and not self.less(j, a):
            j -= 1
        if i > j:
            self.swap(j, a)
            return j, True
        self.swap(i, j)
        i += 1
        j -= 1
        while True:
            while i <= j and self.less(i, a):
                i += 1
            while i <= j and not self.less(j, a):
                j -= 1
            if i > j:
                break
            self.swap(i, j)
            i += 1
            j -= 1
        self.swap(j, a)
        return j, False

    def partition_equal(self, a: int, b: int, pivot: int) -> int:
        self.swap(a, pivot)
        i, j = a + 1, b - 1
        while True:
            while i <= j and not self.less(a, i):
                i += 1
            while i <= j and self.less(a, j):
                j -= 1
            if i > j:
                return i
            self.swap(i, j)
            i += 1
            j -= 1

    def ascending_until(self, i: int, b: int) -> int:
        """The first index from ``i`` on (below ``b``) whose element is less than the one
        before it; ``b`` if none."""
        while i < b and not self.less(i, i - 1):
            i += 1
        return i

    def partial_insertion_sort(self, a: int, b: int) -> bool:
        max_steps, shortest_shifting = 5, 50
        i = a + 1
        for _ in range(max_steps):
            i = self.ascending_until(i, b)
            if i == b:
                return True
            if b - a < shortest_shifting:
                return False
            self.swap(i, i - 1)
            if i - a >= 2:
                self.shift_left(i - 1)
            if b - i >= 2:
                self.shift_right(i, b)
        return False

    def shift_left(self, j: int) -> None:
        """The element at ``j`` swapped left while less than its left neighbour (as Go's,
        down to index 1 whatever the range)."""
        while j >= 1:
            if not self.less(j, j - 1):
                break
            self.swap(j, j - 1)
            j -= 1

    def shift_right(self, j: int, b: int) -> None:
        """The element at ``j`` swapped right while its right neighbour is less."""
        j += 1
        while j < b:
            if not self.less(j, j - 1):
                break
            self.swap(j, j - 1)
            j += 1

    def break_patterns(self, a: int, b: int) -> None:
        length = b - a
        if length < 8:
            return
        random = length  # Go's xorshift, seeded with the length
        modulus = 1 << length.bit_length()  # nextPowerOfTwo
        mid = a + (length // 4) * 2
        for idx in range(mid - 1, mid + 2):
            random ^= (random << 13) & _MASK64
            random ^= random >> 17
            random ^= (random << 5) & _MASK64
            other = random & (modulus - 1)
            if other >= length:
                other -= length
            self.swap(idx, a + other)

    def choose_pivot(self, a: int, b: int) -> tuple[int, int]:
        shortest_ninther, max_swaps = 50, 4 * 3
        length = b - a
        swaps = [0]
        i = a + length // 4 * 1
        j = a + length // 4 * 2
        k = a + length // 4 * 3
        if length >= 8:
            if length >= shortest_ninther:
                i = self.median(i - 1, i, i + 1, swaps)
                j = self.median(j - 1, j, j + 1, swaps)
                k = self.median(k - 1, k, k + 1, swaps)
            j = self.median(i, j, k, swaps)
        if swaps[0] == 0:
            return j, _INCREASING
        if swaps[0] == max_swaps:
            return j, _DECREASING
        return j, _UNKNOWN

    def order2(self, a: int, b: int, swaps: list[int]) -> tuple[int, int]:
        if self.less(b, a):
            swaps[0] += 1
            return b, a
        return a, b

    def median(self, a: int, b: int, c: int, swaps: list[int]) -> int:
        a, b = self.order2(a, b, swaps)
        b, c = self.order2(b, c, swaps)
        a, b = self.order2(a, b, swaps)
        return b

    def reverse_range(self, a: int, b: int) -> None:
        i, j = a, b - 1
        while i < j:
            self.swap(i, j)
            i += 1
            j -= 1


class _KeyedSorter(_Sorter):
    __slots__ = ("keys",)

    def __init__(self, items: list, keys: list) -> None:
        super().__init__(items, lt)
        self.keys = keys

    def less(self, i: int, j: int) -> bool:
        keys = self.keys
        return keys[i] < keys[j]

    def swap(self, i: int, j: int) -> None:
        items, keys = self.items, self.keys
        items[i], items[j] = items[j], items[i]
        keys[i], keys[j] = keys[j], keys[i]

    def ascending_until(self, i: int, b: int) -> int:
        if i >= b:
            return b
        keys = self.keys
        descents = map(lt, islice(keys, i, b), islice(keys, i - 1, b - 1))
        return next(compress(count(i), descents), b)

    # The swaps of one shift end with the element past every neighbour it was less than (or
    # that was less than it): one rotation of the slice between.

    def shift_left(self, j: int) -> None:
        keys = self.keys
        key = keys[j]
        if j < 1 or not key < keys[j - 1]:
            return
        # From j - 1 down to 0, the first key not greater than the moving one: it stops after.
        stop = next(compress(count(j - 1, -1), map(le, reversed(keys[:j]), repeat(key))), -1)
        land = stop + 1
        for seq in (self.items, keys):
            seq[land : j + 1] = [seq[j], *seq[land:j]]

    def shift_right(self, j: int, b: int) -> None:
        keys = self.keys
        key = keys[j]
        if j + 1 >= b or not keys[j + 1] < key:
            return
        # From j + 1 on, the first key not less than the moving one: it stops before.
        stop = next(compress(count(j + 1), map(ge, islice(keys, j + 1, b), repeat(key))), b)
        for seq in (self.items, keys):
            seq[j:stop] = [*seq[j + 1 : stop], seq[j]]
