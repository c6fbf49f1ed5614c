"""Additive schema evolution read by real libraries, straight from the data dir.

A version whose appends added nullable columns holds files of several
schemas: each file keeps the schema (and quiver.schema_version) it was
written under. These tests pin what pyarrow.dataset, DuckDB, polars and
pyrosome make of such a version (docs/format.md, "Schema evolution";
docs/clients.md, "Evolved versions"), and that Quiver serves the union.
"""

from __future__ import annotations

import json
import re

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.flight as flight
import pyarrow.parquet as pq
import pytest
from pyrosome import ParquetDal

from helpers import action1, get, profile_dir, put

V1 = pa.schema([("id", pa.int64()), ("region", pa.string())])
# 1.1.0 adds "amount" (between the old columns, as a client may send it)
# and "note".
V2 = pa.schema([("id", pa.int64()), ("amount", pa.float64()), ("region", pa.string()), ("note", pa.string())])
UNION = pa.schema([("id", pa.int64()), ("region", pa.string()), ("amount", pa.float64()), ("note", pa.string())])

WANT = [
    {"id": 1, "region": "eu", "amount": None, "note": None},
    {"id": 2, "region": "us", "amount": None, "note": None},
    {"id": 3, "region": "eu", "amount": 3.5, "note": "new"},
    {"id": 4, "region": None, "amount": 4.5, "note": None},
]


def latest_files(srv, path: str) -> list[str]:
    """The visible data files of the latest version, in index order."""
    pdir = profile_dir(srv, path)
    vdir = pdir / json.loads((pdir / "manifest.json").read_text())["latest_data_dir"]
    files = [p for p in vdir.iterdir() if re.fullmatch(r"\d+\.parquet", p.name)]
    return [str(p) for p in sorted(files, key=lambda p: int(p.stem))]


@pytest.fixture
def evolved(server, client, keys):
    """v0 written under 1.0.0 (id, region); an append under 1.1.0 adds
    amount and note; a plain append follows under 1.1.0."""
    put(client, keys, pa.table({"id": [1, 2], "region": ["eu", "us"]}, schema=V1), mode="write", schema_version="1.0.0")
    res = put(client, keys, pa.table({"id": [3], "amount": [3.5], "region": ["eu"], "note": ["new"]}, schema=V2), schema_version="1.1.0")
    assert res["schema_version"] == "1.1.0" and res["schema"]
    put(client, keys, pa.table({"id": [4], "region": [None], "amount": [4.5], "note": [None]}, schema=UNION))
    return keys


def test_quiver_serves_the_union(server, client, evolved):
    t = get(client, evolved)
    assert t.schema == UNION
    assert t.to_pylist() == WANT
    # Projection of new columns only; GetSchema; list-versions counts.
    assert get(client, {"path": evolved, "columns": ["note"]}).column("note").to_pylist() == [None, None, "new", None]
    info = client.get_schema(flight.FlightDescriptor.for_path(*evolved.split("/")))
    assert info.schema == UNION
    lv = action1(client, "list-versions", {"path": evolved})
    v = lv["versions"][0]
    assert v["schema_version"] == "1.1.0"
    assert v["schema_versions"] == [
        {"schema_version": "1.0.0", "files": 1, "rows": 2},
        {"schema_version": "1.1.0", "files": 2, "rows": 2},
    ]


def test_files_keep_their_own_schema(server, evolved):
    files = latest_files(server, evolved)
    stamps = [pq.read_metadata(f).metadata[b"quiver.schema_version"].decode() for f in files]
    assert stamps == ["1.0.0", "1.1.0", "1.1.0"]
    assert pq.read_schema(files[0]).names == ["id", "region"]
    assert pq.read_schema(files[1]).names == UNION.names


def test_pyarrow_dataset_with_the_unified_schema(server, evolved):
    files = latest_files(server, evolved)
    # With the unified schema (GetSchema's, or `quiver schema`), missing
    # columns read as nulls.
    t = ds.dataset(files, schema=UNION, format="parquet").to_table()
    assert t.to_pylist() == WANT
    # Without it the dataset takes the first file's schema: the new columns
    # are silently left out.
    t = ds.dataset(files, format="parquet").to_table()
    assert t.schema.names == ["id", "region"]
    assert t.num_rows == 4


def test_duckdb_union_by_name(server, evolved):
    files = latest_files(server, evolved)
    t = duckdb.sql(f"SELECT * FROM read_parquet({files!r}, union_by_name=true) ORDER BY id").arrow()
    t = t.read_all() if hasattr(t, "read_all") else t
    assert t.select(UNION.names).to_pylist() == WANT
    # Without union_by_name DuckDB binds the first file's columns.
    t = duckdb.sql(f"SELECT * FROM read_parquet({files!r}) ORDER BY id").arrow()
    t = t.read_all() if hasattr(t, "read_all") else t
    assert t.column_names == ["id", "region"]


def test_polars_missing_columns_insert(server, evolved):
    files = latest_files(server, evolved)
    got = pl.scan_parquet(files, schema=pl.Schema(pl.from_arrow(UNION.empty_table()).schema), missing_columns="insert").collect()
    assert got.to_dicts() == WANT
    # Without a schema polars takes the first file's and refuses the extra
    # columns of later files.
    with pytest.raises(pl.exceptions.SchemaError):
        pl.scan_parquet(files).collect()
    # extra_columns="ignore" reads, without the new columns.
    got = pl.scan_parquet(files, extra_columns="ignore").collect()
    assert got.columns == ["id", "region"] and got.height == 4


@pytest.mark.local_storage  # pyrosome writes the data directory itself
def test_pyrosome_on_an_evolved_version(server, client, evolved):
    dal = ParquetDal(server.data_dir)
    keys = evolved.split("/")
    # pyrosome reads with pl.scan_parquet over the files: the first file's
    # schema, and a later file's extra columns are an error.
    with pytest.raises(pl.exceptions.SchemaError):
        dal.read(*keys).collect()
    # Its append checks the columns against that same first-file schema: an
    # append with the old columns is accepted (a file without the new
    # columns, no record, visible by pyrosome's rule) ...
    dal.append(pl.DataFrame({"id": [5], "region": ["apac"]}), *keys)
    # ... one with the new columns is refused.
    with pytest.raises(ValueError, match="do not match existing columns"):
        dal.append(pl.DataFrame({"id": [6], "region": ["x"], "amount": [1.0], "note": ["n"]}), *keys)
    # Quiver serves pyrosome's file with nulls in the columns it lacks.
    t = get(client, evolved)
    assert t.to_pylist() == [*WANT, {"id": 5, "region": "apac", "amount": None, "note": None}]


def test_partitioned_evolved_version(server, client, keys):
    """A partitioned version: pyarrow.dataset (hive, unified schema) and
    DuckDB (hive_partitioning, union_by_name) read the whole directory."""
    put(client, keys, pa.table({"id": [1, 2], "region": ["eu", "us"]}, schema=V1), mode="write", partition_by=["region"], schema_version="1.0.0")
    put(client, keys, pa.table({"id": [3], "amount": [3.5], "region": ["eu"], "note": ["new"]}, schema=V2), schema_version="1.1.0")
    want = sorted(WANT[:3], key=lambda r: r["id"])
    t = get(client, keys)
    assert t.schema == UNION
    assert sorted(t.to_pylist(), key=lambda r: r["id"]) == want
    # Pruned to one partition, projected to a new column.
    t = get(client, {"path": keys, "partition": {"region": ["us"]}, "columns": ["note", "id"]})
    assert t.to_pylist() == [{"note": None, "id": 2}]

    pdir = profile_dir(server, keys)
    vdir = pdir / json.loads((pdir / "manifest.json").read_text())["latest_data_dir"]
    dataset = ds.dataset(vdir, schema=UNION, format="parquet", partitioning="hive")
    assert sorted(dataset.to_table().to_pylist(), key=lambda r: r["id"]) == want
    got = duckdb.sql(
        f"SELECT id, region, amount, note FROM read_parquet('{vdir}/*/*.parquet', hive_partitioning=true, union_by_name=true) ORDER BY id"
    ).fetchall()
    assert [dict(zip(UNION.names, r)) for r in got] == want
