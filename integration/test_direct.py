"""The data dir read directly, without Quiver: pyarrow.dataset (hive
partitioning; the whole version dir, or exactly the files the commit records
list), polars.scan_parquet(hive_partitioning=True) and DuckDB
read_parquet(..., hive_partitioning=true) give the same rows as DoGet.
pyarrow reads Quiver's files without a warning."""

from __future__ import annotations

import json
import shutil
import warnings

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest

from helpers import action, assert_tables_equal, get, profile_dir, put
from typecases import BUGS, CASES, DIRECT_LIMITS, LIMITS

ORDER_SCHEMA = pa.schema(
    [("id", pa.int64()), ("region", pa.string()), ("year", pa.int32()), ("amount", pa.float64()), ("note", pa.large_string())]
)


def orders(rows: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(ORDER_SCHEMA.names, r)) for r in rows], schema=ORDER_SCHEMA)


def canonical(t: pa.Table, like: pa.Schema) -> list[dict]:
    """Rows of t in like's column order and types, sorted by id: readers put
    hive columns last and infer their types (int32 or int64) from the path."""
    t = t.select(like.names).cast(like)
    return sorted(t.to_pylist(), key=lambda r: r["id"])


def duck(sql: str) -> pa.Table:
    res = duckdb.sql(sql).arrow()
    return res.read_all() if hasattr(res, "read_all") else res


def latest_dir(srv, path):
    pdir = profile_dir(srv, path)
    return pdir / json.loads((pdir / "manifest.json").read_text())["latest_data_dir"]


@pytest.fixture
def partitioned(server, client, keys):
    """A profile written partitioned by (region, year), with awkward values: a
    space and a slash, '=' and '%', nulls in both columns; then two appends,
    one touching three partitions."""
    put(
        client,
        keys,
        orders(
            [
                (1, "eu", 2024, 1.0, "a"),
                (2, "us west/2", 2024, 2.0, None),
                (3, None, 2025, 3.0, "c"),
                (4, "eu", None, 4.0, "d"),
                (5, "a=b%c", 2025, 5.0, "é"),
            ]
        ),
        mode="write",
        partition_by=["region", "year"],
        schema_version="1.0.0",
    )
    put(client, keys, orders([(6, "eu", 2024, 6.0, "f"), (7, "apac", 2026, 7.0, "g"), (8, None, None, None, None)]))
    put(client, keys, orders([(9, "eu", 2024, 9.0, "i")]))
    return keys


def test_partitioned_version_read_directly(server, client, partitioned):
    want = get(client, partitioned)
    assert want.schema == ORDER_SCHEMA
    rows = canonical(want, want.schema)
    assert [r["id"] for r in rows] == list(range(1, 10))
    vdir = latest_dir(server, partitioned)

    # pyarrow.dataset over the version dir (hidden files are skipped by default)
    whole = ds.dataset(vdir, format="parquet", partitioning="hive").to_table()
    assert canonical(whole, want.schema) == rows

    # pyarrow.dataset over exactly the files the commit records list
    records = action(client, "lineage", {"path": partitioned})
    files = [str(profile_dir(server, partitioned) / f["path"]) for r in records for f in r["files"]]
    assert len(files) == 5 + 3 + 1
    committed = ds.dataset(files, format="parquet", partitioning="hive", partition_base_dir=str(vdir)).to_table()
    assert canonical(committed, want.schema) == rows

    # polars with hive partitions
    lf = pl.scan_parquet(str(vdir / "**" / "*.parquet"), hive_partitioning=True)
    assert canonical(lf.collect().to_arrow(), want.schema) == rows

    # DuckDB with hive partitions
    got = duck(f"SELECT * FROM read_parquet('{vdir}/**/*.parquet', hive_partitioning = true)")
    assert canonical(got, want.schema) == rows

    # partition pruning by Quiver and by the readers agree
    eu = get(client, {"path": partitioned, "partition": {"region": "eu"}})
    eu_pa = ds.dataset(vdir, format="parquet", partitioning="hive").to_table(filter=ds.field("region") == "eu")
    eu_pl = pl.scan_parquet(str(vdir / "**" / "*.parquet"), hive_partitioning=True).filter(pl.col("region") == "eu").collect()
    eu_duck = duck(f"SELECT * FROM read_parquet('{vdir}/**/*.parquet', hive_partitioning = true) WHERE region = 'eu'")
    for t in (eu_pa, eu_pl.to_arrow(), eu_duck):
        assert canonical(t, want.schema) == canonical(eu, want.schema)
    nulls = get(client, {"path": partitioned, "partition": {"region": None}})
    assert sorted(nulls.column("id").to_pylist()) == [3, 8]


def test_uncommitted_partition_file_is_invisible_to_quiver_not_to_globs(server, client, partitioned):
    """A file under a partition dir that no commit record lists (left by a
    killed multi-partition put) is not data for Quiver. Readers that glob the
    directory do see it: read the commit's files to get exactly what Quiver
    serves."""
    vdir = latest_dir(server, partitioned)
    orphan_dir = vdir / "region=eu" / "year=2024"
    shutil.copy(orphan_dir / "0.parquet", orphan_dir / "7.parquet")
    want = get(client, partitioned)
    assert want.num_rows == 9
    globbed = ds.dataset(vdir, format="parquet", partitioning="hive").to_table()
    assert globbed.num_rows == 9 + 1
    problems = action(client, "verify", {"path": partitioned})[0]["problems"]
    assert [(p["kind"], p["path"]) for p in problems] == [("orphan", f"{partitioned}/v0/region=eu/year=2024/7.parquet")]


def test_unpartitioned_versions_read_directly(server, client, keys):
    put(client, keys, orders([(1, "eu", 2024, 1.0, "a")]), mode="write")
    put(client, keys, orders([(2, "eu", 2024, 2.0, "b")]), mode="write")
    for i in range(3, 13):  # indices 1..10: "10.parquet" sorts before "2.parquet" as text
        put(client, keys, orders([(i, "us", None, float(i), None)]))
    want = get(client, keys)
    assert want.column("id").to_pylist() == list(range(2, 13))  # index order
    vdir = latest_dir(server, keys)
    assert vdir.name == "v1"
    rows = canonical(want, want.schema)
    assert canonical(ds.dataset(vdir, format="parquet").to_table(), want.schema) == rows
    assert canonical(pl.scan_parquet(str(vdir / "*.parquet")).collect().to_arrow(), want.schema) == rows
    assert canonical(duck(f"SELECT * FROM read_parquet('{vdir}/*.parquet')"), want.schema) == rows
    # in index order, files one by one, pyarrow gives DoGet's exact table
    files = sorted(vdir.glob("[0-9]*.parquet"), key=lambda p: int(p.stem))
    assert_tables_equal(pa.concat_tables(pq.read_table(f) for f in files).replace_schema_metadata(want.schema.metadata), want)


@pytest.mark.filterwarnings("error")
def test_pyarrow_reads_quiver_files_without_warnings(server, client, keys, capfd):
    table = CASES["all_columns_together"]
    res = put(client, keys, table, mode="write", schema_version="3.1.4")
    put(client, keys, table)
    pdir = profile_dir(server, keys)
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f in (pdir / "v0").glob("[0-9]*.parquet"):
            pf = pq.ParquetFile(f)
            kv = pf.metadata.metadata
            assert kv[b"quiver.schema_version"] == b"3.1.4"
            assert b"ARROW:schema" in kv
            assert pf.metadata.num_rows == table.num_rows
            got = pq.read_table(f)
            assert got.num_rows == table.num_rows
            for batch in pf.iter_batches(batch_size=1):
                assert batch.num_rows == 1
        got = ds.dataset(pdir / "v0", format="parquet").to_table()
        assert got.num_rows == 2 * table.num_rows
    out, err = capfd.readouterr()
    assert err == "" and out == "", f"pyarrow printed while reading Quiver's files:\n{out}\n{err}"
    assert res["schema_version"] == "3.1.4"


# What pyarrow's own Parquet reader gives back for a file Quiver wrote: the
# same as for a file pyarrow wrote itself (Parquet has no date64, no
# time32[s] and no timestamp[s]; pyarrow does not restore them from the
# stored Arrow schema).
PYARROW_READS_AS = {
    "date64": pa.date32(),
    "time32_s": pa.time32("ms"),
    **{f"timestamp_s_{z}": pa.timestamp("ms", tz) for z, tz in (("naive", None), ("utc", "UTC"), ("berlin", "Europe/Berlin"), ("offset", "+05:30"))},
}


def _shape(t: pa.DataType):
    """A type with the names of nested fields left out (pyarrow reads a list's
    item field as Parquet's "element", a map's entries under other names)."""
    if t.num_fields == 0:
        return str(t)
    return (t.id, getattr(t, "list_size", None), tuple(_shape(t.field(i).type) for i in range(t.num_fields)))


@pytest.mark.parametrize("name", [n for n in CASES if n not in LIMITS and n not in BUGS and n not in DIRECT_LIMITS and CASES[n].num_columns == 1])
def test_pyarrow_reads_each_type_from_disk(server, client, name):
    """Every type that round-trips through Quiver is also read by pyarrow
    straight from the file, with the same values and type, up to what
    pyarrow does with its own Parquet files too: nested field names, and
    the units of PYARROW_READS_AS."""
    table = CASES[name]
    res = put(client, f"disk/{name}", table, mode="write")
    f = profile_dir(server, f"disk/{name}") / res["files"][0]["path"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = pq.read_table(f)
    assert pq.ParquetFile(f).metadata.metadata[b"quiver.schema_version"] == b""
    want_type = PYARROW_READS_AS.get(name, table.schema.field(0).type)
    got_type = got.schema.field(0).type
    assert _shape(got_type) == _shape(want_type), (got_type, want_type)
    assert got.column(0).to_pylist() == table.column(0).cast(want_type).to_pylist()
