"""The Python client (python/, distribution quiverdb, import quiver) against
a real `quiver serve`: reads (parallel endpoints, in order), writes and
appends from every input it takes, request-id retries, errors as pyarrow's
classes with Quiver's messages, the admin calls, auth and TLS, and
QuiverDal side by side with pyrosome's ParquetDal.

scripts/test-python.sh installs ./python into the venv before pytest runs,
so these tests import the installed package, as a user would.
"""

from __future__ import annotations

import importlib.metadata
import inspect
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import time
import warnings
from pathlib import Path, PurePosixPath

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.flight as flight
import pytest
import pyrosome

import quiver
from helpers import REPO, SECRET, SERVING_RE, START_TIMEOUT_S, QuiverServer

# --- the package itself -----------------------------------------------------------------


def test_installed_package_is_quiverdb_depending_on_pyarrow_only():
    dist = importlib.metadata.distribution("quiverdb")
    assert dist.version == quiver.__version__
    requires = dist.requires or []
    hard = [r for r in requires if "extra ==" not in r]
    assert [re.split(r"[<>=!~ ;]", r)[0] for r in hard] == ["pyarrow"], requires
    extras = {re.search(r'extra == "(\w+)"', r).group(1) for r in requires if "extra ==" in r}
    assert extras == {"polars", "pandas"}
    # the suite runs the installed copy, not the source tree
    assert Path(quiver.__file__).resolve().parent != (REPO / "python" / "quiver").resolve()


def test_every_public_name_has_a_docstring():
    for name in quiver.__all__:
        obj = getattr(quiver, name)
        assert inspect.getdoc(obj), name
    for name, fn in inspect.getmembers(quiver.Client, inspect.isfunction):
        if not name.startswith("_"):
            assert inspect.getdoc(fn), f"Client.{name}"
            assert fn.__annotations__.get("return"), f"Client.{name} has no return annotation"


# --- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def q(server: QuiverServer):
    c = quiver.connect(f"127.0.0.1:{server.port}", timeout=60)
    yield c
    c.close()


class Spy:
    """The real pyarrow FlightClient, with its calls recorded (and, when
    told, a failure injected after a call has really been made)."""

    def __init__(self, real: flight.FlightClient):
        self.real = real
        self.calls: list[tuple[str, object]] = []
        self.lose_put_answers = 0  # that many puts commit, then "lose" their answer

    def __getattr__(self, name):
        return getattr(self.real, name)

    def get_flight_info(self, desc, options=None):
        self.calls.append(("GetFlightInfo", json.loads(desc.command)))
        return self.real.get_flight_info(desc, options)

    def do_get(self, ticket, options=None):
        self.calls.append(("DoGet", ticket.ticket))
        return self.real.do_get(ticket, options)

    def do_put(self, desc, schema, options=None):
        self.calls.append(("DoPut", json.loads(desc.command)))
        writer, reader = self.real.do_put(desc, schema, options)
        if self.lose_put_answers <= 0:
            return writer, reader
        self.lose_put_answers -= 1
        return _LosingWriter(writer), reader


class _LosingWriter:
    """A DoPut writer whose put commits on the server, after which the
    client hears UNAVAILABLE, as when a connection breaks after the commit
    but before the answer arrives."""

    def __init__(self, w):
        self.w = w

    def write_batch(self, b):
        self.w.write_batch(b)

    def done_writing(self):
        self.w.done_writing()

    def write_metadata(self, m):
        self.w.write_metadata(m)

    def close(self):
        self.w.close()
        raise flight.FlightUnavailableError("Flight returned unavailable error, with message: connection reset (injected)")


def spy(c: quiver.Client) -> Spy:
    s = Spy(c._fc)
    c._fc = s
    return s


def orders(n: int, start: int = 0) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array(["eu" if i % 2 == 0 else "us" for i in ids], pa.string()),
            "total": pa.array([i * 1.5 for i in ids], pa.float64()),
        }
    )


# --- connecting --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "url, kwargs, want",
    [
        ("  ", {}, "empty server address"),
        ("http://x:1", {}, "want host:port"),
        ("grpc://x:1", {"tls_root_certs": b"-----BEGIN CERTIFICATE-----"}, "not a grpc+tls:// address"),
        ("x:1", {"cert_chain": b"pem"}, "cert_chain and private_key go together"),
        ("x:1", {"token": "t", "username": "u", "password": "p"}, "not both"),
        ("x:1", {"username": "u"}, "go together"),
        ("x:1", {"tls_root_certs": "/no/such/ca.pem"}, "cannot read"),
        ("x:1", {"threads": 0}, "threads"),
    ],
)
def test_connect_refuses_bad_arguments(url, kwargs, want):
    with pytest.raises(ValueError, match=re.escape(want)):
        quiver.connect(url, **kwargs)


def test_connect_defaults_to_env(server, monkeypatch):
    monkeypatch.setenv("QUIVER_SERVER", f"127.0.0.1:{server.port}")
    with quiver.connect() as c:
        assert c.url == f"grpc+tcp://127.0.0.1:{server.port}"
        assert isinstance(c.list(), list)


def test_unreachable_server_is_unavailable_with_a_hint(free_port):
    c = quiver.connect(f"127.0.0.1:{free_port}", retries=0)
    with pytest.raises(flight.FlightUnavailableError) as e:
        c.read("a/b")
    msg = str(e.value)
    assert msg.startswith(f"cannot reach a quiver server at grpc+tcp://127.0.0.1:{free_port}"), msg
    assert "gRPC client debug context" not in msg and "Flight returned" in e.value.detail


@pytest.fixture
def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- reads ---------------------------------------------------------------------------------


def test_write_then_read_round_trip(q, keys):
    t = orders(10)
    t = t.replace_schema_metadata({"owner": "data-team"})
    res = q.write(keys, t, schema_version="1.2.0", metadata={"run": "r42"})
    assert (res["version"], res["index"], res["rows"], res["mode"]) == ("v0", 0, 10, "write")
    assert res["schema_version"] == "1.2.0" and res["metadata"] == {"run": "r42"}
    assert res["request_id"].startswith("quiver-py-") and len(res["files"]) == 1
    got = q.read(keys)
    assert got.equals(t, check_metadata=True)
    assert q.read(tuple(keys.split("/"))).equals(t)  # keys as a tuple
    assert q.read(keys, ["total", "id"]).column_names == ["total", "id"]
    assert q.schema(keys).equals(t.schema, check_metadata=True)


def test_versions_partitions_and_columns(q, keys):
    q.write(keys, orders(4))
    q.write(keys, orders(6, 100), partition_by=["region"])
    assert q.read(keys, version=0).num_rows == 4
    assert q.read(keys, version="v0").num_rows == 4
    assert q.read(keys).num_rows == 6
    eu = q.read(keys, partition={"region": "eu"})
    assert set(eu.column("region").to_pylist()) == {"eu"} and eu.num_rows == 3
    assert q.read(keys, partition={"region": ["eu", "us"]}).num_rows == 6
    v = q.versions(keys)
    assert v["latest"] == "v1" and [x["version"] for x in v["versions"]] == ["v0", "v1"]
    assert v["versions"][1]["partition_by"] == ["region"]
    assert q.schema(keys, version=0).names == ["id", "region", "total"]


def test_parallel_endpoints_arrive_in_order(start_server):
    # one endpoint per file: 12 appends are 12 endpoints, fetched 4 at a time
    srv = start_server(extra=["--endpoint-bytes", "1"])
    c = quiver.connect(f"127.0.0.1:{srv.port}", threads=4)
    parts = [orders(50 + i, start=1000 * i) for i in range(12)]
    for p in parts:
        c.append("par/x", p)
    s = spy(c)
    got = c.read("par/x")
    plans = [x for x in s.calls if x[0] == "GetFlightInfo"]
    gets = [x for x in s.calls if x[0] == "DoGet"]
    assert len(plans) == 1 and len(gets) == 12
    assert got.column("id").to_pylist() == pa.concat_tables(parts).column("id").to_pylist()
    assert c.read("par/x", threads=1).equals(got)
    # every endpoint ticket pins the planned snapshot
    assert all(json.loads(t)["files"] for _, t in gets)
    c.close()


def test_limit_reads_the_first_rows_in_order(start_server):
    srv = start_server(extra=["--endpoint-bytes", "1"])
    c = quiver.connect(f"127.0.0.1:{srv.port}")
    for i in range(5):
        c.append("lim/x", orders(10, start=10 * i))
    s = spy(c)
    head = c.read("lim/x", limit=25)
    assert head.column("id").to_pylist() == list(range(25))
    # "limit" is sent to the server; one that does not take it yet is read
    # endpoint by endpoint until there are enough rows (3 of the 5 here)
    assert s.calls[0] == ("GetFlightInfo", {"path": "lim/x", "limit": 25})
    if c._server_limit is False:
        assert len([x for x in s.calls if x[0] == "DoGet"]) == 3
    assert c.read("lim/x", limit=0).num_rows == 0
    assert c.read("lim/x", limit=0).schema == head.schema
    assert c.read("lim/x", limit=1000).num_rows == 50
    assert c.read_batches("lim/x", limit=12).read_all().column("id").to_pylist() == list(range(12))
    assert c.read_batches("lim/x").read_all().num_rows == 50
    with pytest.raises(ValueError, match="limit"):
        c.read("lim/x", limit=-1)
    c.close()


def test_filter_is_pushed_to_the_server(q, keys):
    q.write(keys, orders(10), partition_by=["region"])
    s = spy(q)
    got = q.read(keys, ["id"], filter=[("total", ">", 6.0), ("region", "in", ["eu"])])
    assert sorted(got.column("id").to_pylist()) == [6, 8] and got.column_names == ["id"]
    # the JSON form of docs/protocol.md, ANDed
    assert s.calls[0][1]["filter"] == {"and": [
        {"col": "total", "op": ">", "value": 6.0},
        {"col": "region", "op": "in", "value": ["eu"]},
    ]}
    q._fc = s.real
    # the other spellings select the same rows
    assert sorted(q.read(keys, filter={"region": "eu"}).column("id").to_pylist()) == [0, 2, 4, 6, 8]
    assert sorted(q.read(keys, filter=("id", "not in", [0, 2, 4, 6, 8])).column("id").to_pylist()) == [1, 3, 5, 7, 9]
    raw = {"or": [{"col": "id", "op": "<", "value": 2}, {"not": {"col": "total", "op": "<=", "value": 12}}]}
    assert sorted(q.read(keys, filter=raw).column("id").to_pylist()) == [0, 1, 9]
    assert q.read(keys, filter=("total", "is_null", None)).num_rows == 0
    # a pyarrow.dataset expression travels as Substrait
    s = spy(q)
    expr = (pc.field("region") == "eu") & (pc.field("total") > 6.0) | (pc.field("id") == 1)
    got = q.read(keys, filter=expr)
    assert sorted(got.column("id").to_pylist()) == [1, 6, 8]
    assert "substrait" in [x for x in s.calls if x[0] == "GetFlightInfo"][-1][1]["filter"]
    q._fc = s.real
    assert q.read(keys, filter=pc.field("id").isin([3, 4]), limit=1).num_rows == 1
    assert q.read_batches(keys, filter=[("id", ">=", 5)]).read_all().num_rows == 5
    # errors name what is wrong
    with pytest.raises(pa.ArrowInvalid, match='"nope": no such column'):
        q.read(keys, filter=[("nope", "=", 1)])
    with pytest.raises(pa.ArrowInvalid, match='"total"'):
        q.read(keys, filter=[("total", "=", "x")])
    with pytest.raises(pa.ArrowInvalid, match="not supported"):
        q.read(keys, filter=pc.field("total").is_nan())
    for bad, msg in [
        ([("total", "~", 1)], "op must be one of"),
        ([("total", ">")], "want (column, op, value)"),
        ([("region", "in", "eu")], "wants a list"),
        ([], "empty"),
    ]:
        with pytest.raises(ValueError, match=re.escape(msg)):
            q.read(keys, filter=bad)
    with pytest.raises(TypeError, match="not a string"):
        q.read(keys, filter="total > 1")


def test_not_in_keeps_nulls_as_the_model_each_form_names(q, keys, tmp_path):
    """Red team round 47's p01: on x = [1, 5, null, 2], `not in [5]` kept
    rows 0 and 3 whatever its form. The list form promises pyarrow.parquet's
    filters=, whose `not in` keeps the null row (pyarrow's is_in is false on
    a null); a pyarrow expression travels as Substrait, whose in-list is
    SQL's (null on a null), so it drops the null row as DuckDB and polars
    do (docs/python.md, "Row filters")."""
    import pyarrow.parquet as pq

    t = pa.table({"id": pa.array([0, 1, 2, 3], pa.int64()), "x": pa.array([1, 5, None, 2], pa.int64())})
    q.write(keys, t)
    pq.write_table(t, tmp_path / "t.parquet")

    def ids(**kw):
        return sorted(q.read(keys, **kw).column("id").to_pylist())

    model = sorted(pq.read_table(tmp_path / "t.parquet", filters=[("x", "not in", [5])]).column("id").to_pylist())
    assert model == [0, 2, 3]
    assert ids(filter=[("x", "not in", [5])]) == model
    assert ids(filter=("x", "not in", [5, 1])) == [2, 3]
    # an expression, and the JSON form, are SQL's
    sql = sorted(r[0] for r in duckdb.sql("select id from t where x not in (5)").fetchall())
    assert sql == [0, 3]
    assert ids(filter=~pc.field("x").isin([5])) == sql
    assert ids(filter={"not": {"col": "x", "op": "in", "value": [5]}}) == sql
    assert ids(filter=~pc.field("x").isin([5]) | pc.field("x").is_null()) == model
    # `in` and `!=` agree with pyarrow.parquet already
    for f in ([("x", "in", [5])], [("x", "!=", 5)]):
        want = sorted(pq.read_table(tmp_path / "t.parquet", filters=f).column("id").to_pylist())
        assert ids(filter=f) == want, f


def test_limit_is_one_endpoint_and_pushed_into_scans(start_server):
    srv = start_server(extra=["--endpoint-bytes", "1"])
    c = quiver.connect(f"127.0.0.1:{srv.port}")
    for i in range(4):
        c.append("lim/y", orders(10, start=10 * i))
    info = c._fc.get_flight_info(flight.FlightDescriptor.for_command(json.dumps({"path": "lim/y", "limit": 15}).encode()))
    assert info.total_records == 15 and len(info.endpoints) == 1
    s = spy(c)
    assert c.scan_polars("lim/y").head(3).collect()["id"].to_list() == [0, 1, 2]
    assert all(json.loads(t).get("limit") == 3 for kind, t in s.calls if kind == "DoGet")
    c._fc = s.real
    c.close()


def test_read_polars_pandas_and_lazy_scan(q, keys):
    q.write(keys, orders(20))
    df = q.read_polars(keys)
    assert isinstance(df, pl.DataFrame) and df.shape == (20, 3)
    pdf = q.read_pandas(keys, ["id"])
    assert isinstance(pdf, pd.DataFrame) and list(pdf.columns) == ["id"]
    s = spy(q)
    lf = q.scan_polars(keys)
    assert isinstance(lf, pl.LazyFrame)
    q.append(keys, orders(5, 100))  # after the plan: not in the snapshot
    out = lf.filter(pl.col("total") > 20).select("id").collect()
    assert out["id"].to_list() == [i for i in range(20) if i * 1.5 > 20]
    tickets = [json.loads(t) for kind, t in s.calls if kind == "DoGet"]
    assert tickets and all(set(t["columns"]) == {"id", "total"} for t in tickets)  # projection pushed down
    assert lf.head(3).collect().height == 3
    q._fc = s.real


# --- writes ---------------------------------------------------------------------------------


class CStream:
    """Only the Arrow PyCapsule stream interface, as DuckDB and others offer."""

    def __init__(self, t: pa.Table):
        self.t = t

    def __arrow_c_stream__(self, requested_schema=None):
        return self.t.__arrow_c_stream__(requested_schema)


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda t: t, id="table"),
        pytest.param(lambda t: t.to_batches()[0], id="record-batch"),
        pytest.param(lambda t: t.to_batches(), id="list-of-batches"),
        pytest.param(lambda t: pa.RecordBatchReader.from_batches(t.schema, t.to_batches()), id="reader"),
        pytest.param(lambda t: pl.from_arrow(t), id="polars"),
        pytest.param(lambda t: pl.from_arrow(t).lazy(), id="polars-lazy"),
        pytest.param(lambda t: t.to_pandas(), id="pandas"),
        pytest.param(lambda t: t.to_pydict(), id="dict"),
        pytest.param(lambda t: CStream(t), id="c-stream"),
        pytest.param(lambda t: duckdb.sql("select * from t"), id="duckdb"),
    ],
)
def test_every_input_kind(q, keys, make):
    t = orders(7)  # noqa: F841 (duckdb's replacement scan finds it by name)
    q.write(keys, make(t))
    got = q.read(keys)
    assert got.column("id").to_pylist() == list(range(7))
    assert got.column("region").to_pylist() == t.column("region").to_pylist()
    # appends of every kind conform to what is there (large_string vs string)
    q.append(keys, make(t))
    assert q.read(keys).num_rows == 14


def test_view_layouts_are_sent_as_large_ones(q, keys):
    """string_view (what pyarrow.table(polars_df) makes) cannot be written to
    Parquet by the server: the client sends large_string instead."""
    t = pa.table({"s": pa.array(["a", None, "c"], pa.string_view()), "l": pa.array([[b"x"], [], None], pa.list_(pa.binary_view()))})
    q.write(keys, t)
    got = q.read(keys)
    assert got.schema.field("s").type == pa.large_string() and got.column("s").to_pylist() == ["a", None, "c"]
    assert got.schema.field("l").type == pa.list_(pa.large_binary()) and got.column("l").to_pylist() == [[b"x"], [], None]
    q.append(keys, pa.RecordBatchReader.from_batches(t.schema, t.to_batches()))
    assert q.read(keys).num_rows == 6


def test_unsupported_input_is_a_type_error(q, keys):
    with pytest.raises(TypeError, match="cannot put a builtins.int"):
        q.write(keys, 3)


def test_append_conforms_string_layouts_but_not_real_mismatches(q, keys):
    q.write(keys, pa.table({"a": pa.array([1], pa.int64()), "s": pa.array(["x"], pa.string())}))
    q.append(keys, pl.DataFrame({"s": ["y"], "a": [2]}))  # large_string, reordered
    got = q.read(keys)
    assert got.schema.field("s").type == pa.string() and got.column("a").to_pylist() == [1, 2]
    with pytest.raises(pa.ArrowInvalid) as e:
        q.append(keys, pa.table({"a": [3], "s": [1.5]}))
    msg = str(e.value)
    assert msg.startswith("schema mismatch") and keys in msg and "store:" not in msg and "Flight returned" not in msg


def test_big_batches_are_sliced_under_the_message_limit(start_server):
    srv = start_server(extra=["--max-recv-msg-size", str(1 << 20)])
    c = quiver.connect(f"127.0.0.1:{srv.port}", max_batch_bytes=256 << 10)
    t = pa.table({"x": pa.array(range(400_000), pa.int64())})  # 3.2 MB in one chunk
    assert t.column("x").num_chunks == 1 and t.nbytes > 3 * (1 << 20)
    assert c.write("big/x", t)["rows"] == 400_000
    assert c.read("big/x").equals(t)
    big = quiver.connect(f"127.0.0.1:{srv.port}", max_batch_bytes=0)  # no slicing: the server refuses
    with pytest.raises(pa.ArrowException, match="larger than max"):
        big.write("big/y", t)
    c.close()
    big.close()


def test_a_retry_reuses_the_request_id_and_never_writes_twice(q, keys, caplog):
    q.write(keys, orders(3))
    s = spy(q)
    s.lose_put_answers = 1
    with caplog.at_level(logging.WARNING, logger="quiver"):
        res = q.append(keys, orders(2, 10))
    puts = [x[1] for x in s.calls if x[0] == "DoPut"]
    assert len(puts) == 2 and puts[0]["request_id"] == puts[1]["request_id"] == res["request_id"]
    assert "retrying in 1s with request id " + res["request_id"] in caplog.text
    assert q.read(keys).num_rows == 5  # once, not twice
    appends = [r for r in q.lineage(keys) if r["mode"] == "append"]
    assert len(appends) == 1 and appends[0]["request_id"] == res["request_id"]
    assert (appends[0]["index"], appends[0]["files"]) == (res["index"], res["files"])
    # a fresh id per call: the same data appended again is a new commit
    assert q.append(keys, orders(2, 10))["request_id"] != res["request_id"]
    # an explicit id is the caller's idempotency key across calls
    a = q.append(keys, orders(1, 20), request_id="job-42")
    b = q.append(keys, orders(1, 20), request_id="job-42")
    assert a == b and q.read(keys).num_rows == 8
    q._fc = s.real


def test_a_stream_is_not_retried_after_it_was_read(q, keys):
    q.write(keys, orders(3))
    s = spy(q)
    s.lose_put_answers = 1
    t = orders(2, 10)
    with pytest.raises(flight.FlightUnavailableError, match="injected"):
        q.append(keys, pa.RecordBatchReader.from_batches(t.schema, t.to_batches()))
    assert len([x for x in s.calls if x[0] == "DoPut"]) == 1
    q._fc = s.real


def test_unavailable_then_served_is_retried(quiver_bin, tmp_path, free_port):
    """The server is not up yet when the put starts: UNAVAILABLE, then the
    retry (after 1 s) finds it."""
    c = quiver.connect(f"127.0.0.1:{free_port}", retries=3)
    data = tmp_path / SECRET
    data.mkdir()
    log = open(tmp_path / "serve.log", "wb")
    proc = None

    def start():
        nonlocal proc
        time.sleep(0.3)
        proc = subprocess.Popen([str(quiver_bin), "serve", "--data-dir", str(data), "--addr", f"127.0.0.1:{free_port}"], stdout=log, stderr=subprocess.STDOUT)

    import threading

    th = threading.Thread(target=start)
    th.start()
    try:
        res = c.write("late/x", orders(3))
        assert res["rows"] == 3 and c.read("late/x").num_rows == 3
    finally:
        th.join()
        c.close()
        if proc is not None:
            proc.send_signal(signal.SIGTERM)
            assert proc.wait(timeout=20) == 0
        log.close()


def _failing_reader(t: pa.Table, exc: BaseException) -> pa.RecordBatchReader:
    def gen():
        yield t.to_batches()[0]
        raise exc

    return pa.RecordBatchReader.from_batches(t.schema, gen())


@pytest.mark.parametrize("exc", [RuntimeError("source broke"), KeyboardInterrupt()], ids=["error", "ctrl-c"])
def test_a_put_that_fails_on_our_side_commits_nothing(q, keys, exc):
    t = orders(4)
    with pytest.raises(type(exc)):
        q.write(keys, _failing_reader(t, exc))
    with pytest.raises(FileNotFoundError):
        q.read(keys)
    q.write(keys, t)
    with pytest.raises(type(exc)):
        q.append(keys, _failing_reader(orders(4, 10), exc))
    assert q.read(keys).num_rows == 4
    assert len(q.lineage(keys)) == 1


# --- errors ---------------------------------------------------------------------------------


def test_errors_keep_pyarrows_classes_with_quivers_messages(q, keys):
    q.write(keys, orders(2))
    typo = keys[:-1] + ("x" if keys[-1] != "x" else "y")
    with pytest.raises(quiver.NotFoundError) as e:
        q.read(typo)
    err = e.value
    assert isinstance(err, pa.ArrowKeyError) and isinstance(err, KeyError) and isinstance(err, FileNotFoundError)
    assert str(err) == f"profile not found: {typo} (did you mean {keys}?)"
    assert "Flight returned not found error" in err.detail and err.kind == "not found"
    with pytest.raises(pa.ArrowKeyError, match=r"has no version v9"):
        q.read(keys, version=9)
    with pytest.raises(pa.ArrowInvalid) as e:
        q.read(keys, ["nope"])
    assert str(e.value).startswith(f'{keys}: no column ["nope"]'), str(e.value)
    with pytest.raises(pa.ArrowInvalid, match="partition column"):
        q.write(keys, orders(2), partition_by=["nope"])
    for fn in (q.versions, q.lineage, q.schema, q.compact, q.break_lock):
        with pytest.raises(quiver.NotFoundError, match=re.escape(f"did you mean {keys}?")):
            fn(typo)
    for msg in (str(e.value),):
        for bad in ("store:", "catalog:", "codec:", "read ", SECRET, "/tmp/"):
            assert bad not in msg


def test_unknown_field_from_raw_pyarrow_is_worded_plainly(client):
    with pytest.raises(pa.ArrowInvalid, match='CMD descriptor has an unknown field "bogus"'):
        client.get_flight_info(flight.FlightDescriptor.for_command(b'{"path": "a", "bogus": 1}'))


# --- admin ----------------------------------------------------------------------------------


def test_admin_calls(q, keys):
    q.write(keys, orders(3))
    q.append(keys, orders(3, 10))
    q.append(keys, orders(3, 20))
    profiles = {p.path: p for p in q.list(keys.split("/")[0])}
    assert profiles[keys].rows == 9 and profiles[keys].keys == tuple(keys.split("/"))
    assert isinstance(profiles[keys].schema, pa.Schema)
    lin = q.lineage(keys)
    assert [r["mode"] for r in lin] == ["write", "append", "append"]
    rep = q.verify(path=keys)
    assert rep["ok"] is True and rep["checked_files"] == 3 and rep["problems"] == []
    assert q.verify(prefix=keys)["ok"] is True  # (other tests under t/ leave orphans on purpose)
    assert q.verify(path=keys, sample=0.5, seed=7)["ok"] is True
    new = q.compact(keys)
    assert new["version"] == "v1" and new["rows"] == 9
    assert q.read(keys).column("id").to_pylist() == [0, 1, 2, 10, 11, 12, 20, 21, 22]
    kept = q.remove_old_versions(keys, keep=1, grace=3600)
    assert kept["removed"] == [] and kept["kept"][0]["version"] == "v0"
    assert q.remove_old_versions(keys, keep=1, grace=0)["removed"] == ["v0"]
    assert "removed" in q.sweep(older_than=3600)
    assert q.break_lock(keys)["broken"] is False
    with pytest.raises(ValueError, match="not both"):
        q.verify(path=keys, prefix="x")


def test_verify_with_a_public_key(quiver_bin, start_server, tmp_path):
    for name in ("signer", "other"):
        subprocess.run([str(quiver_bin), "keygen", "--out", str(tmp_path / name)], check=True, capture_output=True)
    srv = start_server(extra=["--signing-key", str(tmp_path / "signer")])
    c = quiver.connect(f"127.0.0.1:{srv.port}")
    c.write("signed/x", orders(2))
    assert c.lineage("signed/x")[0]["sig"]
    good = c.verify(path="signed/x", public_key=(tmp_path / "signer.pub").read_text())
    assert good["ok"] is True, good
    bad = c.verify(path="signed/x", public_key=(tmp_path / "other.pub").read_bytes())
    assert bad["ok"] is False and {p["kind"] for p in bad["problems"]} == {"bad_signature"}, bad
    c.close()


# --- auth and TLS -------------------------------------------------------------------------

TOKENS = {"admin": "qv-admin-token-0123456789", "sales": "qv-sales-token-0123456789"}


@pytest.fixture(scope="module")
def auth_url(start_server, tmp_path_factory):
    import hashlib

    def sha(t):
        return hashlib.sha256(t.encode()).hexdigest()

    auth = tmp_path_factory.mktemp("pyauth") / "auth.json"
    auth.write_text(
        json.dumps(
            {
                # bcrypt (cost 4) of "pw-for-tests" (integration/test_auth.py)
                "users": [{"name": "alice", "password_bcrypt": "$2a$04$mHCBmroBsEx/FM6dsuklweOk/BhTZeuxReSEofsT67OQAzlVoHS4O", "role": "write"}],
                "tokens": [
                    {"sha256": sha(TOKENS["admin"]), "identity": "admin", "role": "admin"},
                    {"sha256": sha(TOKENS["sales"]), "identity": "sales", "role": "read", "prefixes": ["sales"]},
                ],
            }
        )
    )
    auth.chmod(0o600)
    srv = start_server(extra=["--auth-file", str(auth)])
    url = f"127.0.0.1:{srv.port}"
    with quiver.connect(url, token=TOKENS["admin"]) as admin:
        admin.write("sales/orders", orders(3))
        admin.write("other/orders", orders(3))
    return url


def test_tokens_and_suggestions_only_of_visible_profiles(auth_url, monkeypatch):
    monkeypatch.delenv("QUIVER_TOKEN", raising=False)
    with pytest.raises(flight.FlightUnauthenticatedError, match=r"authentication required.*\(pass token= or username=/password= to quiver.connect"):
        quiver.connect(auth_url).read("sales/orders")
    sales = quiver.connect(auth_url, token=TOKENS["sales"])
    assert sales.read("sales/orders").num_rows == 3
    assert [p.path for p in sales.list()] == ["sales/orders"]
    with pytest.raises(quiver.NotFoundError, match=re.escape("(did you mean sales/orders?)")):
        sales.read("sales/ordrs")
    # outside its prefixes: denied, and the hint never names other/orders
    with pytest.raises(flight.FlightUnauthorizedError) as e:
        sales.read("orders")
    assert str(e.value).endswith("(did you mean sales/orders?)"), str(e.value)
    with pytest.raises(flight.FlightUnauthorizedError, match="needs role write"):
        sales.append("sales/orders", orders(1))
    monkeypatch.setenv("QUIVER_TOKEN", TOKENS["admin"])
    assert {p.path for p in quiver.connect(auth_url).list()} == {"sales/orders", "other/orders"}


def test_basic_auth_login(auth_url):
    c = quiver.connect(auth_url, username="alice", password="pw-for-tests")
    res = c.append("sales/orders", orders(1, 50))
    assert res["writer"] == "alice"
    # an expired session is renewed once, transparently
    c._headers = [(b"authorization", b"Bearer expired-session")]
    assert c.read("sales/orders").num_rows >= 4
    with pytest.raises(flight.FlightUnauthenticatedError):
        quiver.connect(auth_url, username="alice", password="wrong")


def _openssl(*args: str, cwd: Path) -> None:
    if shutil.which("openssl") is None:
        pytest.fail("openssl is needed to make the TLS test's certificates (apt-get install openssl)")
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("certs")
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
             "-subj", "/CN=quiver test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=d)
    for name, ext in [("server", "subjectAltName=IP:127.0.0.1,DNS:localhost"), ("client", "extendedKeyUsage=clientAuth")]:
        _openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", f"/CN={name}",
                 "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        (d / f"{name}.ext").write_text(ext + "\n")
        _openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                 "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)
    return d


def _serve_tls(quiver_bin: Path, tmp: Path, extra: list[str]):
    data = tmp / SECRET
    data.mkdir()
    logf = tmp / "serve.log"
    out = open(logf, "wb")
    proc = subprocess.Popen([str(quiver_bin), "serve", "--data-dir", str(data), "--addr", "127.0.0.1:0", *extra],
                            stdout=out, stderr=subprocess.STDOUT)
    out.close()
    deadline = time.monotonic() + START_TIMEOUT_S
    while not (m := SERVING_RE.search(logf.read_bytes())):
        assert proc.poll() is None and time.monotonic() < deadline, logf.read_text()
        time.sleep(0.02)
    return proc, int(m.group(1))


@pytest.mark.parametrize("mutual", [False, True], ids=["tls", "mtls"])
def test_tls(quiver_bin, certs, tmp_path, mutual):
    extra = ["--tls-cert", str(certs / "server.pem"), "--tls-key", str(certs / "server.key")]
    if mutual:
        extra += ["--tls-client-ca", str(certs / "ca.pem")]
    proc, port = _serve_tls(quiver_bin, tmp_path, extra)
    try:
        kw = {"cert_chain": certs / "client.pem", "private_key": str(certs / "client.key")} if mutual else {}
        # a path, or the PEM bytes; host:port becomes grpc+tls:// with TLS options
        c = quiver.connect(f"127.0.0.1:{port}", tls_root_certs=str(certs / "ca.pem"), **kw)
        assert c.url == f"grpc+tls://127.0.0.1:{port}"
        c.write("tls/x", orders(2))
        c2 = quiver.connect(f"grpc+tls://localhost:{port}", tls_root_certs=(certs / "ca.pem").read_bytes(), **kw)
        assert c2.read("tls/x").num_rows == 2
        if mutual:
            with pytest.raises(ValueError, match="cannot be combined with a client certificate"):
                quiver.connect(f"grpc+tls://127.0.0.1:{port}", disable_server_verification=True, **kw)
        else:
            assert quiver.connect(f"grpc+tls://127.0.0.1:{port}", disable_server_verification=True).read("tls/x").num_rows == 2
        with pytest.raises(flight.FlightUnavailableError):
            quiver.connect(f"grpc://127.0.0.1:{port}", retries=0, timeout=5).read("tls/x")  # plaintext to a TLS server
        if mutual:
            with pytest.raises(flight.FlightUnavailableError):
                quiver.connect(f"127.0.0.1:{port}", tls_root_certs=certs / "ca.pem", retries=0, timeout=5).read("tls/x")
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=20) == 0


# --- QuiverDal and pyrosome -----------------------------------------------------------------


def test_quiverdal_has_pyrosomes_signatures():
    for name in ("read", "write", "append"):
        mine = inspect.signature(getattr(quiver.QuiverDal, name))
        theirs = inspect.signature(getattr(pyrosome.ParquetDal, name))
        assert [(p.name, p.kind) for p in mine.parameters.values()] == [(p.name, p.kind) for p in theirs.parameters.values()], name


def test_the_same_code_runs_on_pyrosome_and_on_quiver(server, tmp_path):
    """One function, written for pyrosome, given a ParquetDal on a local
    dir and a QuiverDal on the server: the same answers."""

    def job(dal) -> dict:
        out = {}
        out["write"] = dal.write(pl.DataFrame({"id": [1, 2], "name": ["a", "b"]}), "team", "users").name
        out["append"] = dal.append(pl.DataFrame({"name": ["c"], "id": [3]}), "team", "users").name
        out["read"] = dal.read("team", "users").sort("id").collect().to_dicts()
        out["lazy"] = dal.read("team", "users").filter(pl.col("id") > 1).select("name").collect()["name"].to_list()
        out["write2"] = dal.write(pl.DataFrame({"id": [9], "name": ["z"]}).lazy(), "team", "users").name
        out["read2"] = dal.read("team", "users").collect().to_dicts()
        with pytest.raises(FileNotFoundError):
            dal.read("team", "nobody")
        with pytest.raises(ValueError):
            dal.append(pl.DataFrame({"other": [1]}), "team", "users")
        with pytest.raises(ValueError):
            dal.read()
        with pytest.warns(UserWarning, match="Appending to empty data"):
            out["append_new"] = dal.append(pl.DataFrame({"x": [1]}), "team", "fresh").name
        return out

    local = job(pyrosome.ParquetDal(tmp_path / "data"))
    with quiver.QuiverDal(f"grpc://127.0.0.1:{server.port}") as dal:
        remote = job(dal)
        assert isinstance(dal.write(pl.DataFrame({"x": [1]}), "team", "other"), PurePosixPath)
    assert remote == local
    assert local["write"] == "v0" and local["append"] == "1.parquet" and local["write2"] == "v1"


# --- the walkthrough ----------------------------------------------------------------------


def test_docs_python_md_runs(start_server, monkeypatch):
    """Every ```python block of docs/python.md, in order, in one namespace,
    against a fresh server (QUIVER_SERVER), from the repository root."""
    srv = start_server()
    monkeypatch.setenv("QUIVER_SERVER", f"127.0.0.1:{srv.port}")
    monkeypatch.delenv("QUIVER_TOKEN", raising=False)
    monkeypatch.chdir(REPO)
    text = (REPO / "docs" / "python.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    ns: dict = {"__name__": "docs_python_md"}
    for i, code in enumerate(blocks):
        if "# not run by the test" in code:
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            exec(compile(code, f"docs/python.md block {i + 1}", "exec"), ns)


def test_readme_python_block_runs(start_server):
    """README.md's "From Python" block, with its localhost:8815 replaced by
    a fresh server's address."""
    srv = start_server()
    readme = (REPO / "README.md").read_text()
    section = re.search(r"\n## From Python\n(.*?)\n## ", readme, re.S)
    assert section, "README.md has no 'From Python' section"
    blocks = re.findall(r"```python\n(.*?)```", section.group(1), re.S)
    assert len(blocks) == 1 and '"localhost:8815"' in blocks[0]
    code = blocks[0].replace('"localhost:8815"', f'"127.0.0.1:{srv.port}"')
    ns: dict = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        exec(compile(code, "README.md From Python", "exec"), ns)
    got = ns["q"].read("sales/orders").sort_by("id")
    assert got.column("id").to_pylist() == [1, 2, 3, 4]
