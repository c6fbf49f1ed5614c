"""The store on S3 read directly from the bucket, without Quiver: a Quiver
server serves a bucket of a versitygw S3 server (quiver serve --data-dir
s3://…); pyarrow.dataset (pyarrow's S3FileSystem), polars (its own object
store client) and DuckDB read the bucket over S3 with hive partitions and
get the same rows as DoGet.

DuckDB reaches S3 through an fsspec filesystem (fsspec's wrapper of
pyarrow's S3FileSystem, registered with register_filesystem): its own
httpfs extension is downloaded at run time, which an offline machine cannot
do. Every read goes over the S3 API; nothing reads versitygw's directory.
"""

from __future__ import annotations

import json

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest
from fsspec.implementations.arrow import ArrowFSWrapper

from helpers import S3_ACCESS_KEY, S3_REGION, S3_SECRET_KEY, action, get, put

SCHEMA = pa.schema([("id", pa.int64()), ("region", pa.string()), ("year", pa.int32()), ("amount", pa.float64())])


def rows(items: list[tuple]) -> pa.Table:
    return pa.Table.from_pylist([dict(zip(SCHEMA.names, r)) for r in items], schema=SCHEMA)


def canonical(t: pa.Table) -> list[dict]:
    """Rows in SCHEMA's column order and types, sorted by id (readers put hive
    columns last and infer their types from the path)."""
    return sorted(t.select(SCHEMA.names).cast(SCHEMA).to_pylist(), key=lambda r: r["id"])


@pytest.fixture(scope="module")
def on_s3(s3, start_server):
    """A Quiver server on a fresh bucket, and the bucket."""
    bucket = s3.new_bucket(prefix="lake/quiver")
    return start_server(bucket=bucket), bucket


def latest(fs, bucket, path: str) -> str:
    """The bucket path of a profile's latest version, from its manifest."""
    base = f"{bucket.name}/{bucket.prefix}/{path}"
    with fs.open_input_stream(f"{base}/manifest.json") as f:
        return f"{base}/{json.loads(f.read())['latest_data_dir']}"


def duck_on(fs) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.register_filesystem(ArrowFSWrapper(fs))
    return con


def duck(con: duckdb.DuckDBPyConnection, sql: str) -> pa.Table:
    res = con.sql(sql).arrow()
    return res.read_all() if hasattr(res, "read_all") else res


def polars_options(s3) -> dict[str, str]:
    return {
        "aws_access_key_id": S3_ACCESS_KEY,
        "aws_secret_access_key": S3_SECRET_KEY,
        "aws_region": S3_REGION,
        "aws_endpoint_url": s3.endpoint,
        "aws_allow_http": "true",
    }


def test_bucket_read_directly_matches_doget(s3, on_s3):
    srv, bucket = on_s3
    c = srv.client()
    path = "sales/orders"
    put(
        c,
        path,
        rows([(1, "eu", 2024, 1.0), (2, "us west", 2024, 2.0), (3, None, 2025, 3.0), (4, "eu", None, 4.0), (5, "a=b%c", 2025, 5.0)]),
        mode="write",
        partition_by=["region", "year"],
    )
    put(c, path, rows([(6, "eu", 2024, 6.0), (7, "apac", 2026, 7.0)]))
    put(c, path, rows([(8, "eu", 2024, 8.0)]))
    want = get(c, path)
    assert want.num_rows == 8
    expect = canonical(want)

    fs = s3.filesystem()
    vdir = latest(fs, bucket, path)
    url = f"s3://{vdir}"

    # pyarrow.dataset over the version's prefix (hidden objects skipped)
    got_pa = ds.dataset(vdir, filesystem=fs, format="parquet", partitioning="hive").to_table()
    assert canonical(got_pa) == expect

    # exactly the objects the commit records list
    records = action(c, "lineage", {"path": path})
    keys = [f"{bucket.name}/{bucket.prefix}/{path}/{f['path']}" for r in records for f in r["files"]]
    committed = ds.dataset(keys, filesystem=fs, format="parquet", partitioning="hive", partition_base_dir=vdir).to_table()
    assert canonical(committed) == expect

    # polars, its own S3 client
    got_pl = pl.scan_parquet(f"{url}/**/*.parquet", hive_partitioning=True, storage_options=polars_options(s3)).collect()
    assert canonical(got_pl.to_arrow()) == expect

    # DuckDB
    con = duck_on(fs)
    got_duck = duck(con, f"SELECT * FROM read_parquet('{url}/**/*.parquet', hive_partitioning = true)")
    assert canonical(got_duck) == expect

    # partition pruning by Quiver and by each reader agree
    eu = canonical(get(c, {"path": path, "partition": {"region": "eu"}}))
    assert [r["id"] for r in eu] == [1, 4, 6, 8]
    eu_pa = ds.dataset(vdir, filesystem=fs, format="parquet", partitioning="hive").to_table(filter=ds.field("region") == "eu")
    eu_pl = (
        pl.scan_parquet(f"{url}/**/*.parquet", hive_partitioning=True, storage_options=polars_options(s3))
        .filter(pl.col("region") == "eu")
        .collect()
        .to_arrow()
    )
    eu_duck = duck(con, f"SELECT * FROM read_parquet('{url}/**/*.parquet', hive_partitioning = true) WHERE region = 'eu'")
    for t in (eu_pa, eu_pl, eu_duck):
        assert canonical(t) == eu


def test_unpartitioned_bucket_versions(s3, on_s3):
    srv, bucket = on_s3
    c = srv.client()
    path = "events/raw"
    put(c, path, rows([(1, "eu", 2024, 1.0)]), mode="write")
    put(c, path, rows([(2, "us", 2025, 2.0)]), mode="write")
    for i in range(3, 14):  # file indices 1..11: "10.parquet" sorts before "2.parquet" as text
        put(c, path, rows([(i, "us", None, float(i))]))
    want = get(c, path)
    assert want.column("id").to_pylist() == list(range(2, 14))
    fs = s3.filesystem()
    vdir = latest(fs, bucket, path)
    assert vdir.endswith("/v1")
    expect = canonical(want)
    assert canonical(ds.dataset(vdir, filesystem=fs, format="parquet").to_table()) == expect
    got_pl = pl.scan_parquet(f"s3://{vdir}/*.parquet", storage_options=polars_options(s3)).collect()
    assert canonical(got_pl.to_arrow()) == expect
    assert canonical(duck(duck_on(fs), f"SELECT * FROM read_parquet('s3://{vdir}/*.parquet')")) == expect
    # the first version is still there, whole, as pyrosome keeps it
    v0 = vdir[: -len("v1")] + "v0"
    assert ds.dataset(v0, filesystem=fs, format="parquet").to_table().column("id").to_pylist() == [1]
