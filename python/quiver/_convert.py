"""What a put accepts, turned into Arrow record batches."""

from __future__ import annotations

import sys
from collections.abc import Iterator, Mapping
from typing import Any

import pyarrow as pa

__all__ = ["Source", "conform_layout", "to_source"]

# The size above which a batch is sliced before it is sent: each batch is
# one gRPC message, and the server refuses messages over its
# --max-recv-msg-size (128 MiB by default). The Go client uses the same.
MAX_BATCH_BYTES = 32 << 20


def _slices(batch: pa.RecordBatch, limit: int) -> Iterator[pa.RecordBatch]:
    n = batch.num_rows
    size = batch.nbytes
    if limit <= 0 or size <= limit or n <= 1:
        yield batch
        return
    step = max(1, n * limit // size)
    for off in range(0, n, step):
        yield batch.slice(off, step)


class Source:
    """The data of one put: its schema and its batches.

    A source made from data held in memory (a table, a data frame) can be
    sent again, so a put that failed with UNAVAILABLE is retried whole; a
    stream (a RecordBatchReader, an Arrow C stream) can be sent once, so it
    is retried only if nothing was read from it yet.
    """

    def __init__(self, schema: pa.Schema, table: pa.Table | None = None, reader: pa.RecordBatchReader | None = None):
        self.schema = schema
        self._table = table
        self._reader = reader
        self.started = False

    @property
    def table(self) -> pa.Table | None:
        """The data, when it is held in memory."""
        return self._table

    @property
    def replayable(self) -> bool:
        """Whether another attempt can send the data again."""
        return self._table is not None or not self.started

    def batches(self, limit: int = MAX_BATCH_BYTES) -> Iterator[pa.RecordBatch]:
        """The batches to send, each at most about limit bytes."""
        self.started = True
        if self._table is not None:
            for b in self._table.to_batches():
                yield from _slices(b, limit)
            return
        assert self._reader is not None
        for b in self._reader:
            yield from _slices(b, limit)


def _unview(t: pa.DataType) -> pa.DataType:
    """t with string and binary views replaced by their large equivalents,
    which every Parquet writer takes (arrow-go cannot write views).
    list_view is left alone: pyarrow 26 casts it to an invalid large_list
    when it ends in a null, so the server refuses it instead."""
    if pa.types.is_string_view(t):
        return pa.large_string()
    if pa.types.is_binary_view(t):
        return pa.large_binary()
    if pa.types.is_list(t):
        return pa.list_(t.value_field.with_type(_unview(t.value_type)))
    if pa.types.is_large_list(t):
        return pa.large_list(t.value_field.with_type(_unview(t.value_type)))
    if pa.types.is_fixed_size_list(t):
        return pa.list_(t.value_field.with_type(_unview(t.value_type)), t.list_size)
    if pa.types.is_struct(t):
        return pa.struct([t.field(i).with_type(_unview(t.field(i).type)) for i in range(t.num_fields)])
    if pa.types.is_map(t):
        return pa.map_(t.key_field.with_type(_unview(t.key_type)), t.item_field.with_type(_unview(t.item_type)), t.keys_sorted)
    return t


def _storable(schema: pa.Schema) -> pa.Schema | None:
    """The schema to send instead of schema, or None if it is fine."""
    fields = [f.with_type(_unview(f.type)) for f in schema]
    if all(a.type == b.type for a, b in zip(fields, schema)):
        return None
    return pa.schema(fields, metadata=schema.metadata)


def _table_source(t: pa.Table) -> Source:
    if (s := _storable(t.schema)) is not None:
        t = t.cast(s)
    return Source(t.schema, table=t)


def _reader_source(r: pa.RecordBatchReader) -> Source:
    if (s := _storable(r.schema)) is not None:
        r = r.cast(s)
    return Source(r.schema, reader=r)


def _module_of(obj: object) -> str:
    return type(obj).__module__.split(".", 1)[0]


def to_source(data: Any) -> Source:
    """Accepts a pyarrow Table, RecordBatch, RecordBatchReader or list of
    RecordBatches; a polars DataFrame or LazyFrame; a pandas DataFrame (its
    index is not stored: reset_index() first to keep it); a mapping of
    column names to values (pyarrow.table's input); or any object with
    the Arrow PyCapsule stream or array interface (DuckDB relations, ...).

    string_view and binary_view, which Quiver's Parquet writer cannot
    store, are sent as large_string and large_binary.
    """
    if isinstance(data, pa.Table):
        return _table_source(data)
    if isinstance(data, pa.RecordBatch):
        return _table_source(pa.Table.from_batches([data]))
    if isinstance(data, pa.RecordBatchReader):
        return _reader_source(data)
    if isinstance(data, list) and data and all(isinstance(b, pa.RecordBatch) for b in data):
        return _table_source(pa.Table.from_batches(data))
    mod = _module_of(data)
    if mod == "polars":
        pl = sys.modules["polars"]
        if isinstance(data, pl.LazyFrame):
            data = data.collect()
        if isinstance(data, pl.DataFrame):
            return _table_source(data.to_arrow())
    if mod == "pandas":
        pd = sys.modules["pandas"]
        if isinstance(data, pd.DataFrame):
            return _table_source(pa.Table.from_pandas(data, preserve_index=False))
    if isinstance(data, Mapping):
        return _table_source(pa.table(dict(data)))
    if hasattr(data, "__arrow_c_stream__"):
        return _reader_source(pa.RecordBatchReader.from_stream(data))
    if hasattr(data, "__arrow_c_array__"):
        return _table_source(pa.Table.from_batches([pa.record_batch(data)]))
    raise TypeError(
        f"cannot put a {type(data).__module__}.{type(data).__qualname__}: want a pyarrow Table, "
        "RecordBatch or RecordBatchReader, a polars or pandas DataFrame, a dict of columns, "
        "or an object with __arrow_c_stream__"
    )


def _logical(t: pa.DataType) -> object:
    """A type with its offset width and view layout forgotten: string,
    large_string and string_view are one logical type (so are the binary
    and list variants)."""
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return "string"
    if pa.types.is_binary(t) or pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return "binary"
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) or pa.types.is_large_list_view(t):
        return ("list", _logical(t.value_type))
    if pa.types.is_fixed_size_list(t):
        return ("fixed_size_list", t.list_size, _logical(t.value_type))
    if pa.types.is_struct(t):
        return ("struct", tuple((t.field(i).name, _logical(t.field(i).type)) for i in range(t.num_fields)))
    if pa.types.is_map(t):
        return ("map", _logical(t.key_type), _logical(t.item_type))
    return t


def conform_layout(table: pa.Table, target: pa.Schema) -> pa.Table | None:
    """table with each column whose type differs from target's only in
    layout (large_string for string, ...) cast to target's type; None when
    there is no such column. Other differences are left for the server to
    judge (it reorders columns and widens types losslessly)."""
    fields = []
    changed = False
    for f in table.schema:
        i = target.get_field_index(f.name)
        if i >= 0:
            want = target.field(i).type
            if want != f.type and _logical(want) == _logical(f.type):
                f = f.with_type(want)
                changed = True
        fields.append(f)
    if not changed:
        return None
    return table.cast(pa.schema(fields, metadata=table.schema.metadata))
