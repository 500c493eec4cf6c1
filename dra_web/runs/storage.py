"""Reads: what runs take in the database (their result, trace blob and trace index rows).

"As stored": on PostgreSQL ``pg_column_size`` (after its own compression), on SQLite the bytes
of the stored values; neither counts the database's page and index overhead, which
bench/retention_bench.py measures as the file's or database's growth.
"""

from __future__ import annotations

from django.core.cache import cache
from django.db.models import BigIntegerField, F, Func, QuerySet, Sum, Value
from django.db.models.functions import Coalesce

from dra_web.runs.models import Run, TraceNode

# The integer columns of a trace index row (ids, depth and counts), as SQLite stores them at
# most: 8 bytes each.
_TRACE_ROW_INTEGERS = 8 * 8


class StoredBytes(Func):
    """Bytes one column's value takes as stored (0 for NULL)."""

    output_field = BigIntegerField()

    def as_sqlite(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="COALESCE(LENGTH(CAST(%(expressions)s AS BLOB)), 0)"
        )

    def as_postgresql(self, compiler, connection, **extra):
        return self.as_sql(
            compiler, connection, template="COALESCE(pg_column_size(%(expressions)s), 0)"
        )

    def as_sql(self, compiler, connection, template=None, **extra):
        template = template or "COALESCE(LENGTH(%(expressions)s), 0)"
        return super().as_sql(compiler, connection, template=template, **extra)


_TRACE_TEXT = ("kind", "label", "status", "reason", "message", "extra", "search")


def _trace_row_bytes():
    total = Value(_TRACE_ROW_INTEGERS, output_field=BigIntegerField())
    for column in _TRACE_TEXT:
        total = total + StoredBytes(F(column))
    return total


def with_stored_bytes(qs: QuerySet[Run]) -> QuerySet[Run]:
    """Runs annotated with ``result_bytes`` and ``trace_bytes`` (the row's own columns)."""
    return qs.annotate(
        result_bytes=StoredBytes(F("result")), trace_bytes=StoredBytes(F("trace_blob"))
    )


def run_storage(run: Run) -> dict[str, int]:
    """``{"result", "trace", "traceIndex", "total"}`` in bytes, for one run. Cached for a
    finished run (summing a 200,000-row trace index is not free, and a finished run does not
    change; a re-store moves ``finished_at``, which is part of the key)."""
    key = None
    if run.finished and run.finished_at is not None:
        key = f"dra-web:storage:{run.pk}-{run.finished_at.timestamp()}"
        cached = cache.get(key)
        if cached is not None:
            return cached
    storage = _measure(run)
    if key is not None:
        cache.set(key, storage, timeout=24 * 3600)
    return storage


def _measure(run: Run) -> dict[str, int]:
    row = (
        with_stored_bytes(Run.objects.filter(pk=run.pk))
        .values("result_bytes", "trace_bytes")
        .first()
    )
    row = row or {"result_bytes": 0, "trace_bytes": 0}
    index = TraceNode.objects.filter(run_id=run.pk).aggregate(
        bytes=Coalesce(Sum(_trace_row_bytes()), Value(0), output_field=BigIntegerField())
    )["bytes"]
    storage = {"result": row["result_bytes"], "trace": row["trace_bytes"], "traceIndex": index}
    storage["total"] = sum(storage.values())
    return storage


def runs_storage_bytes(qs: QuerySet[Run]) -> int:
    """The total of ``run_storage`` over many runs (what pruning them frees)."""
    own = with_stored_bytes(qs.order_by()).aggregate(
        result=Coalesce(Sum("result_bytes"), Value(0), output_field=BigIntegerField()),
        trace=Coalesce(Sum("trace_bytes"), Value(0), output_field=BigIntegerField()),
    )
    index = TraceNode.objects.filter(run_id__in=qs.order_by().values("pk")).aggregate(
        bytes=Coalesce(Sum(_trace_row_bytes()), Value(0), output_field=BigIntegerField())
    )["bytes"]
    return own["result"] + own["trace"] + index
