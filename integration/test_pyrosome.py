"""pyrosome both ways, for ParquetDal and CsvDal: pyrosome reads what Quiver
wrote; Quiver serves what pyrosome wrote (the testdata fixture, and pyrosome
writing live into a data dir Quiver serves), including pyrosome appends into a
version Quiver created and Quiver appends into a version pyrosome created;
`verify` reports pyrosome's files as "unrecorded", never as corruption."""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
import warnings

import duckdb
import pyarrow.parquet as pq

import polars as pl
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from pyrosome import CsvDal, ParquetDal

from helpers import (
    OPTS,
    PYROSOME_FIXTURE,
    action,
    action1,
    assert_tables_equal,
    copy_fixture,
    get,
    profile_dir,
    put,
)

# pyrosome writes into the server's data dir: a local disk only.
pytestmark = pytest.mark.local_storage

UTC = dt.UTC

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("name", pa.string()),
        ("amount", pa.float64()),
        ("day", pa.date32()),
        ("at", pa.timestamp("us", "UTC")),
        ("ok", pa.bool_()),
    ]
)


def rows(start: int, n: int) -> pa.Table:
    return pa.Table.from_pylist(
        [
            {
                "id": i,
                "name": None if i % 3 == 0 else f"n{i}",
                "amount": i + 0.25,
                "day": dt.date(2024, 1, 1) + dt.timedelta(days=i),
                "at": None if i % 4 == 0 else dt.datetime(2024, 1, 1, 12, tzinfo=UTC) + dt.timedelta(seconds=i),
                "ok": None if i % 5 == 0 else i % 2 == 0,
            }
            for i in range(start, start + n)
        ],
        schema=SCHEMA,
    )


def df(t: pa.Table) -> pl.DataFrame:
    return pl.from_arrow(t)


def problems(client, path):
    return [(p["kind"], p["path"]) for p in action1(client, "verify", {"path": path})["problems"]]


# --- pyrosome reads what Quiver wrote -------------------------------------------------------


def test_parquetdal_reads_quiver_write_append_write(server, client, keys):
    dal = ParquetDal(server.data_dir)
    k = keys.split("/")
    put(client, keys, rows(0, 3), mode="write")
    assert dal.read(*k).collect().equals(df(rows(0, 3)))
    put(client, keys, rows(3, 2))
    put(client, flight.FlightDescriptor.for_path(*k), rows(5, 1))
    assert dal.read(*k).collect().equals(df(rows(0, 6)))
    put(client, keys, rows(10, 2), mode="write")
    assert dal.read(*k).collect().equals(df(rows(10, 2)))
    # the slash-joined path names the same profile, for pyrosome too
    assert dal.read(keys).collect().equals(df(rows(10, 2)))
    # the layout is pyrosome's: manifest text, data files, claims
    pdir = profile_dir(server, keys)
    assert (pdir / "manifest.json").read_text() == json.dumps({"latest_data_dir": "v1"}, indent=4)
    assert sorted(p.name for p in (pdir / "v0").iterdir() if not p.name.endswith(".json")) == [
        ".1.parquet.claim",
        ".2.parquet.claim",
        "0.parquet",
        "1.parquet",
        "2.parquet",
    ]
    # data files are read-only, as pyrosome leaves its own
    assert all(not (p.stat().st_mode & 0o222) for p in pdir.glob("v*/[0-9]*.parquet"))


def test_small_appends_sharing_a_file_read_everywhere(server, client, keys):
    """Appends that meet in one commit cycle share one data file (each keeps
    its own commit record): pyrosome, pyarrow and DuckDB read the data dir
    as Quiver serves it, and verify is clean."""
    k = keys.split("/")
    put(client, keys, rows(0, 2), mode="write")
    pdir = profile_dir(server, keys)
    lock = pdir / "manifest.json.write_lock"
    lock.write_text("")  # another writer (pyrosome) holds the lock
    results, errors = {}, []

    def append(i):
        try:
            results[i] = put(client, keys, rows(10 * i, 3), request_id=f"share-{i}")
        except Exception as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(1, 7)]
    for t in threads:
        t.start()
    time.sleep(1.0)  # all of them queue behind the lock
    lock.unlink()
    for t in threads:
        t.join()
    assert not errors, errors
    shared = [r for r in results.values() if r["files"][0].get("file_rows")]
    assert len(shared) >= 2, results  # at least one cycle held several
    assert len({r["files"][0]["path"] for r in shared}) < len(shared)
    want = get(client, keys)
    assert want.num_rows == 2 + 6 * 3
    assert sorted(want.column("id").to_pylist()) == sorted(list(range(2)) + [10 * i + j for i in range(1, 7) for j in range(3)])
    files = sorted(str(p) for p in (pdir / "v0").glob("[0-9]*.parquet"))
    assert len(files) < 7  # fewer files than puts
    # pyrosome, pyarrow and DuckDB read every row once, in Quiver's order
    assert ParquetDal(server.data_dir).read(*k).collect().sort("id").equals(df(want).sort("id"))
    assert_tables_equal(pq.read_table(files).sort_by("id"), want.sort_by("id"))
    got = duckdb.sql(f"SELECT * FROM read_parquet({files!r}) ORDER BY id").arrow()
    got = got.read_all() if hasattr(got, "read_all") else got
    assert got.column("id").to_pylist() == want.sort_by("id").column("id").to_pylist()
    assert problems(client, keys) == []
    # each append's own record: its request id, rows, and the file's hash
    lin = action(client, "lineage", {"path": keys})
    assert sorted(r["request_id"] for r in lin if r["mode"] == "append") == [f"share-{i}" for i in range(1, 7)]
    assert all(r["rows"] == 3 and r["files"][0]["rows"] == 3 for r in lin if r["mode"] == "append")
    # a resend is answered, not written
    again = put(client, keys, rows(30, 3), request_id="share-3")
    assert again["seq"] == results[3]["seq"]
    assert get(client, keys).num_rows == want.num_rows


def test_parquetdal_reads_several_quiver_profiles(server, client, keys):
    dal = ParquetDal(server.data_dir)
    names = {f"{keys}_one": rows(0, 2), f"{keys}_deep/a/b": rows(2, 3), f"{keys}_deep/a/c": rows(5, 1)}
    for path, t in names.items():
        put(client, path, t, mode="write")
    for path, t in names.items():
        assert dal.read(*path.split("/")).collect().equals(df(t))
    with pytest.raises(FileNotFoundError):  # a directory above profiles is not one, for pyrosome either
        dal.read(f"{keys}_deep", "a")


def test_csvdal_reads_quiver_csv(server, client, keys):
    csv_dal = CsvDal(server.data_dir)
    k = keys.split("/")
    put(client, keys, rows(0, 3), mode="write", format="csv")
    put(client, keys, rows(3, 2))  # an append follows the profile's format
    got = csv_dal.read(*k).collect()
    # CSV keeps no types: pyrosome infers them (dates and times come back as text)
    assert got.schema == pl.Schema(
        {"id": pl.Int64, "name": pl.String, "amount": pl.Float64, "day": pl.String, "at": pl.String, "ok": pl.Boolean}
    )
    want = df(rows(0, 5))
    assert got["id"].to_list() == want["id"].to_list()
    assert got["name"].to_list() == want["name"].to_list()
    assert got["amount"].to_list() == want["amount"].to_list()
    assert got["ok"].to_list() == want["ok"].to_list()
    assert got["day"].to_list() == [d.isoformat() for d in want["day"].to_list()]
    # and Quiver serves the same text and inferred types
    served = get(client, keys)
    assert served.schema == pa.schema(
        [("id", pa.int64()), ("name", pa.string()), ("amount", pa.float64()), ("day", pa.string()), ("at", pa.string()), ("ok", pa.bool_())]
    )
    assert pl.from_arrow(served).equals(got)
    assert (profile_dir(server, keys) / "v0" / "0.csv").read_text().splitlines()[0] == "id,name,amount,day,at,ok"


def test_csv_float_column_stays_float(server, client, keys):
    """A float64 column whose values happen to be whole numbers must still be
    inferred as Float64 when read back (polars, and so pyrosome, write 2.0 as
    "2.0"); otherwise the column's type depends on the data."""
    t = pa.table({"x": pa.array([1.0, 2.0], pa.float64()), "n": pa.array([1, 2], pa.int64())})
    put(client, keys, t, mode="write", format="csv")
    assert CsvDal(server.data_dir).read(*keys.split("/")).collect_schema() == pl.Schema({"x": pl.Float64, "n": pl.Int64})
    assert get(client, keys).schema == t.schema


# --- pyrosome and Quiver appending into each other's versions -------------------------------


def test_parquet_appends_both_ways(server, client, keys):
    dal = ParquetDal(server.data_dir)
    k = keys.split("/")
    put(client, keys, rows(0, 2), mode="write", metadata={"run": "quiver-1"})  # Quiver creates v0
    # pyrosome appends into the version Quiver created (polars writes
    # large_string; pyrosome casts to the stored schema as polars sees it)
    assert dal.append(df(rows(2, 2)), *k).name == "1.parquet"
    assert_tables_equal(get(client, keys), rows(0, 4))
    # Quiver appends after pyrosome's index
    res = put(client, keys, rows(4, 1))
    assert (res["version"], res["index"]) == ("v0", 2)
    assert dal.read(*k).collect().equals(df(rows(0, 5)))
    assert_tables_equal(get(client, keys), rows(0, 5))
    # verify: pyrosome's file is unrecorded (visible, not audited), nothing is corrupt
    assert problems(client, keys) == [("unrecorded", f"{keys}/v0/1.parquet")]
    # lineage has Quiver's commits only
    assert [(r["index"], r["mode"]) for r in action(client, "lineage", {"path": keys})] == [(0, "write"), (2, "append")]
    # a pyrosome write makes v1; Quiver serves it and appends to it
    assert dal.write(df(rows(10, 2)), *k).name == "v1"
    assert_tables_equal(get(client, keys), rows(10, 2).cast(get(client, keys).schema))
    res = put(client, keys, rows(12, 1))
    assert (res["version"], res["index"]) == ("v1", 1)
    assert dal.read(*k).collect().equals(df(rows(10, 3)))


def test_csv_appends_both_ways(server, client, keys):
    csv_dal = CsvDal(server.data_dir)
    k = keys.split("/")
    t = pa.table({"id": pa.array([1, 2], pa.int64()), "region": ["eu", "us, west"], "total": [1.5, 2.25]})
    put(client, keys, t, mode="write", format="csv")
    assert csv_dal.append(pl.DataFrame({"id": [3], "region": ['say "hi"'], "total": [3.5]}), *k).name == "1.csv"
    res = put(client, keys, pa.table({"id": pa.array([4], pa.int64()), "region": [None], "total": [4.75]}))
    assert (res["version"], res["index"], res["format"]) == ("v0", 2, "csv")
    want = pa.table({"id": pa.array([1, 2, 3, 4], pa.int64()), "region": ["eu", "us, west", 'say "hi"', None], "total": [1.5, 2.25, 3.5, 4.75]})
    assert_tables_equal(get(client, keys), want)
    assert csv_dal.read(*k).collect().equals(pl.from_arrow(want))
    assert problems(client, keys) == [("unrecorded", f"{keys}/v0/1.csv")]
    # pyrosome's CsvDal creates a profile; Quiver appends into it
    k2 = [*k[:-1], k[-1] + "_py"]
    csv_dal.write(pl.DataFrame({"a": [1], "b": ["x"]}), *k2)
    put(client, "/".join(k2), pa.table({"a": pa.array([2], pa.int64()), "b": ["y"]}))
    assert csv_dal.read(*k2).collect().equals(pl.DataFrame({"a": [1, 2], "b": ["x", "y"]}))


def test_pyrosome_append_to_empty_profile_is_a_write(server, client, keys):
    dal = ParquetDal(server.data_dir)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert dal.append(df(rows(0, 2)), *keys.split("/")).name == "v0"
    assert any("Appending to empty data" in str(w.message) for w in caught)
    assert get(client, keys).num_rows == 2
    assert problems(client, keys) == [("unrecorded", f"{keys}/v0/0.parquet")]
    res = put(client, keys, rows(2, 1))
    assert (res["version"], res["index"]) == ("v0", 1)


# --- Quiver serves the fixture pyrosome wrote ---------------------------------------------------


def _json_value(v):
    if isinstance(v, (dt.datetime, dt.date)):
        return v.isoformat()
    return v


POLARS_TO_ARROW = {"String": pa.string(), "Int64": pa.int64(), "Float64": pa.float64(), "Boolean": pa.bool_()}


@pytest.fixture(scope="module")
def fixture_server(start_server, tmp_path_factory):
    data = copy_fixture(PYROSOME_FIXTURE, tmp_path_factory.mktemp("qv-secret-datadir-fixture") / "data")
    (data / "EXPECTED.json").unlink()
    return start_server(data)


EXPECTED = json.loads((PYROSOME_FIXTURE / "EXPECTED.json").read_text())


@pytest.mark.parametrize("path", sorted(EXPECTED["profiles"]))
def test_quiver_serves_pyrosome_fixture(fixture_server, path):
    exp = EXPECTED["profiles"][path]
    c = fixture_server.client()
    got = get(c, path)
    if exp["format"] == "parquet":
        want_types = [(col["name"], col["type"]) for col in exp["columns"]]
        assert [(f.name, str(f.type)) for f in got.schema] == want_types
    else:  # CSV: inferred as pyrosome's CsvDal (polars) infers them
        assert got.schema == pa.schema([(col["name"], POLARS_TO_ARROW[col["polars_type"]]) for col in exp["columns"]])
    assert [{k: _json_value(v) for k, v in r.items()} for r in got.to_pylist()] == exp["rows"]
    info = c.get_flight_info(flight.FlightDescriptor.for_path(*exp["keys"]), options=OPTS)
    # rows of CSV files no commit record describes are unknown until parsed:
    # Flight's -1 ("unknown")
    assert info.total_records == (-1 if exp["format"] == "csv" else exp["row_count"])
    assert c.get_schema(flight.FlightDescriptor.for_path(*exp["keys"])).schema == got.schema
    # pyrosome's own read agrees with Quiver, row for row
    dal = (CsvDal if exp["format"] == "csv" else ParquetDal)(fixture_server.data_dir)
    assert dal.read(*exp["keys"]).collect().equals(pl.from_arrow(got))
    versions = action1(c, "list-versions", {"path": path})
    assert versions["latest"] == exp["latest_version"]

    assert {v["version"]: v["rows"] for v in versions["versions"]} == {
        name: -1 if exp["format"] == "csv" else v["row_count"] for name, v in exp["versions"].items()
    }


def test_list_versions_of_pyrosome_versions_has_no_zero_times(fixture_server):
    """pyrosome records no creation or commit time: list-versions should leave
    them out (or null), not answer Go's zero time 0001-01-01T00:00:00Z."""
    c = fixture_server.client()
    for path in EXPECTED["profiles"]:
        for v in action1(c, "list-versions", {"path": path})["versions"]:
            for field in ("created", "last_commit"):
                assert not str(v.get(field) or "").startswith("0001-"), (path, field, v)


def test_fixture_listing_and_verify(fixture_server):
    c = fixture_server.client()
    listed = {"/".join(p.decode() for p in i.descriptor.path): i.total_records for i in c.list_flights(options=OPTS)}
    assert listed == {p: -1 if e["format"] == "csv" else e["row_count"] for p, e in EXPECTED["profiles"].items()}
    report = action1(c, "verify", {})
    kinds = {(p["kind"], p["path"]) for p in report["problems"]}
    unrecorded = {
        f"{path}/{v}/{f}" for path, e in EXPECTED["profiles"].items() for v, ve in e["versions"].items() for f in ve["data_files"]
    }
    assert {p for k, p in kinds if k == "unrecorded"} == unrecorded
    # the stray half-written temp may be reported as stale (by age), nothing else
    assert {k for k, _ in kinds} <= {"unrecorded", "stale_temp"}
    assert report["checked_files"] == 0  # no commit records: nothing to re-hash


def test_quiver_appends_into_pyrosome_fixture(fixture_server):
    c = fixture_server.client()
    dal, csv_dal = ParquetDal(fixture_server.data_dir), CsvDal(fixture_server.data_dir)

    # sales/orders v1 (pyrosome's, large_string name): Quiver appends string, widened
    before = get(c, "sales/orders")
    new = pa.table(
        {
            "id": pa.array([14], pa.int64()),
            "name": pa.array(["zoë"], pa.string()),
            "amount": [1.0],
            "order_date": pa.array([dt.date(2024, 3, 1)]),
            "created_at": pa.array([dt.datetime(2024, 3, 1, tzinfo=UTC)], pa.timestamp("us", "UTC")),
        }
    )
    res = put(c, "sales/orders", new)
    assert (res["version"], res["index"]) == ("v1", 1)
    after = get(c, "sales/orders")
    assert after.schema == before.schema
    assert after.num_rows == before.num_rows + 1
    assert dal.read("sales", "orders").collect().equals(pl.from_arrow(after))

    # events v0 has pyrosome's claims .1 and .2: Quiver takes index 3
    res = put(c, "events", pa.table({"seq": pa.array([6], pa.int64()), "ts": pa.array([dt.datetime(2024, 3, 1, 10, 2)], pa.timestamp("us")), "kind": ["x"], "ok": [True]}))
    assert (res["version"], res["index"]) == ("v0", 3)
    assert dal.read("events").collect()["seq"].to_list() == [1, 2, 3, 4, 5, 6]

    # exports/daily is CSV: a Quiver append is CSV too, read by CsvDal
    res = put(c, "exports/daily", pa.table({"day": ["2024-01-04"], "region": ["us"], "orders": pa.array([4], pa.int64()), "total": [8.0]}))
    assert (res["version"], res["index"], res["format"]) == ("v0", 2, "csv")
    got = csv_dal.read("exports", "daily").collect()
    assert got["orders"].to_list() == [2, 1, 3, 4]
    assert got["total"].to_list() == [29.5, 7.25, 12.5, 8.0]

    # a Quiver write into a pyrosome profile is the next version, for pyrosome too
    res = put(c, "events", pa.table({"seq": pa.array([100], pa.int64())}), mode="write")
    assert res["version"] == "v1"
    assert dal.read("events").collect().equals(pl.DataFrame({"seq": [100]}))
    # Quiver's own files are recorded: verify lists only pyrosome's as unrecorded
    kinds = {p["kind"] for p in action1(c, "verify", {})["problems"]}
    assert kinds <= {"unrecorded", "stale_temp"}
