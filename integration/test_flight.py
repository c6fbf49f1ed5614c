"""Every Flight RPC and action of DESIGN.md §3/§3.1, through pyarrow.flight,
against a real `quiver serve` process."""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import subprocess
import sys
import threading
import time

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from helpers import (
    CALL_TIMEOUT_S,
    OPTS,
    SECRET,
    action,
    action1,
    assert_tables_equal,
    cmd,
    get,
    profile_dir,
    put,
    write_behind,
)

ACTIONS = ["list-versions", "verify", "lineage", "remove-old-versions", "sweep", "break-lock", "compact", "set-schema-policy"]


def orders(ids, region="eu") -> pa.Table:
    return pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "region": pa.array([region] * len(ids), pa.string()),
            "amount": pa.array([i * 1.5 for i in ids], pa.float64()),
        }
    )


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- DoPut -------------------------------------------------------------------------


def test_do_put_path_descriptor_appends(server, client, keys):
    k = keys.split("/")
    first = put(client, flight.FlightDescriptor.for_path(*k), orders([1, 2, 3]))
    # appending to a profile that does not exist writes v0 (as pyrosome does)
    assert first["path"] == keys
    assert first["version"] == "v0"
    assert first["index"] == 0
    assert first["rows"] == 3
    assert [f["path"] for f in first["files"]] == ["v0/0.parquet"]

    second = put(client, flight.FlightDescriptor.for_path(*k), orders([4, 5]))
    assert (second["version"], second["index"], second["rows"]) == ("v0", 1, 2)
    assert [f["path"] for f in second["files"]] == ["v0/1.parquet"]
    assert second["files"][0]["rows"] == 2

    # the PutResult's hashes are the files' on disk, paths relative to the profile
    pdir = profile_dir(server, keys)
    for res in (first, second):
        for f in res["files"]:
            assert sha256(pdir / f["path"]) == f["sha256"]
    assert_tables_equal(get(client, keys), orders([1, 2, 3, 4, 5]))


def test_do_put_cmd_descriptor_write_with_options(server, client, keys):
    put(client, keys, orders([1]))  # v0
    res = put(
        client,
        keys,
        orders([7, 8]),
        mode="write",
        schema_version="1.2.0",
        metadata={"run_id": "r-7", "n": 2},
    )
    assert res["path"] == keys
    assert res["version"] == "v1"
    assert res["index"] == 0
    assert res["rows"] == 2
    assert res["schema_version"] == "1.2.0"
    assert [f["path"] for f in res["files"]] == ["v1/0.parquet"]
    assert sha256(profile_dir(server, keys) / "v1/0.parquet") == res["files"][0]["sha256"]
    # the commit record in the log is the PutResult; metadata is copied into it
    log = sorted((profile_dir(server, keys) / ".log").glob("*.ndjson"))
    record = json.loads(log[-1].read_text().splitlines()[-1])
    assert record == res
    assert record["metadata"] == {"run_id": "r-7", "n": 2}
    assert record["files"] == res["files"]
    assert_tables_equal(get(client, keys), orders([7, 8]))

    # the schema version is stamped into the data file
    import pyarrow.parquet as pq

    md = pq.ParquetFile(profile_dir(server, keys) / "v1/0.parquet").metadata.metadata
    assert md[b"quiver.schema_version"] == b"1.2.0"


def test_do_put_cmd_descriptor_keys_and_bare_path(client, keys):
    a, b = keys.split("/")
    res = put(client, flight.FlightDescriptor.for_command(json.dumps({"keys": [a, b], "mode": "write"}).encode()), orders([1]))
    assert res["path"] == keys and res["version"] == "v0"
    # a CMD descriptor that is not JSON is a bare path (an append)
    res = put(client, flight.FlightDescriptor.for_command(keys.encode()), orders([2]))
    assert (res["version"], res["index"]) == ("v0", 1)
    assert_tables_equal(get(client, keys), orders([1, 2]))


def test_do_put_partitioned_write(server, client, keys):
    t = pa.concat_tables([orders([1, 2], "eu"), orders([3], "us"), orders([4], "eu")])
    res = put(client, keys, t, mode="write", partition_by=["region"])
    assert res["rows"] == 4
    paths = sorted(f["path"] for f in res["files"])
    assert paths == ["v0/region=eu/0.parquet", "v0/region=us/0.parquet"]
    for f in res["files"]:
        assert sha256(profile_dir(server, keys) / f["path"]) == f["sha256"]
    got = get(client, keys)
    assert got.schema == t.schema  # partition column restored at its position, with its type
    assert sorted(got.to_pylist(), key=lambda r: r["id"]) == t.to_pylist()
    eu = get(client, {"path": keys, "partition": {"region": "eu"}})
    assert sorted(eu.column("id").to_pylist()) == [1, 2, 4]
    both = get(client, {"path": keys, "partition": {"region": ["eu", "us"]}, "columns": ["id"]})
    assert both.column_names == ["id"] and sorted(both.column("id").to_pylist()) == [1, 2, 3, 4]


def test_do_put_request_id_is_idempotent(client, keys):
    first = put(client, keys, orders([1, 2]), request_id="job-42")
    assert first["request_id"] == "job-42"
    # A client whose connection broke after the commit retries with the same
    # request_id: it must get the first put's result back every time (a
    # retry that gets no PutResult cannot tell what happened), and nothing
    # is written. Retried 20 times because losing the result is a race.
    missing = 0
    for _ in range(20):
        writer, reader = client.do_put(cmd(keys, request_id="job-42"), orders([1, 2]).schema, options=OPTS)
        writer.write_batch(orders([1, 2]).to_batches()[0])
        writer.done_writing()
        buf = reader.read()
        writer.close()
        if buf is None:
            missing += 1
            continue
        again = json.loads(buf.to_pybytes())
        assert (again["version"], again["index"], again["files"]) == (first["version"], first["index"], first["files"])
    assert missing == 0, f"{missing} of 20 retried puts got no PutResult (and no error)"
    assert get(client, keys).num_rows == 2  # the retries wrote nothing
    assert len(action(client, "lineage", {"path": keys})) == 1


def test_do_put_many_batches_and_large_batch(client, keys):
    # 40 batches in one stream: one append, one index
    batches = [orders(list(range(i * 100, i * 100 + 100))).to_batches()[0] for i in range(40)]
    res = put(client, keys, pa.Table.from_batches(batches))
    assert res["rows"] == 4000 and len(res["files"]) == 1
    # one batch well above grpc-go's 4 MiB default message size (DESIGN §3.2),
    # read back through DoGet (which slices it under 4 MiB)
    n = 1_000_000
    big = pa.table({"id": pa.array(range(n), pa.int64()), "region": pa.array(["x" * 8] * n), "amount": pa.array([0.5] * n)})
    assert big.nbytes > 16 << 20
    res = put(client, keys, big, mode="write")
    assert res["rows"] == n
    got = get(client, keys)
    assert got.num_rows == n
    assert got.equals(big, check_metadata=True)


@pytest.mark.parametrize("codec", ["zstd", "lz4"])
def test_do_put_compressed_batches_of_compressible_data(client, keys, codec):
    # pyarrow's IPC body compression of data that compresses far below a bit
    # per row (zeros, all nulls) is valid and stored, not refused as malformed
    zeros = pa.table({"x": pa.array([0] * 1_000_000, pa.int64())})
    nulls = pa.table({"x": pa.array([None] * 300_000, pa.int64())})
    opts = flight.FlightCallOptions(timeout=CALL_TIMEOUT_S, write_options=pa.ipc.IpcWriteOptions(compression=codec))
    for name, table in (("zeros", zeros), ("nulls", nulls)):
        path = f"{keys}/{name}"
        writer, reader = client.do_put(cmd(path, mode="write"), table.schema, options=opts)
        writer.write_table(table)
        writer.done_writing()
        res = json.loads(reader.read().to_pybytes())
        writer.close()
        assert res["rows"] == table.num_rows
        assert get(client, path).equals(table)


# --- DoGet ----------------------------------------------------------------------------


def test_do_get_tickets(client, keys):
    put(client, keys, orders([1, 2]), mode="write")  # v0
    put(client, keys, orders([3]), mode="write")  # v1
    put(client, keys, orders([4]))  # v1/1
    # a bare path reads the latest version
    assert_tables_equal(get(client, keys), orders([3, 4]))
    assert_tables_equal(client.do_get(flight.Ticket(keys.encode())).read_all(), orders([3, 4]))
    # JSON tickets: version as "v0" or 0, columns in the asked order
    assert_tables_equal(get(client, {"path": keys, "version": "v0"}), orders([1, 2]))
    assert_tables_equal(get(client, {"keys": keys.split("/"), "version": 0}), orders([1, 2]))
    proj = get(client, {"path": keys, "columns": ["amount", "id"]})
    assert_tables_equal(proj, orders([3, 4]).select(["amount", "id"]))
    # the reader also iterates batch by batch
    reader = client.do_get(flight.Ticket(keys.encode()))
    rows = sum(chunk.data.num_rows for chunk in reader)
    assert rows == 2


# --- GetFlightInfo -------------------------------------------------------------------


def test_get_flight_info_reads_every_endpoint(server, client, keys):
    for i in range(5):
        put(client, keys, orders([i * 10 + 1, i * 10 + 2]))
    want = get(client, keys)
    for desc in (flight.FlightDescriptor.for_path(*keys.split("/")), cmd(keys)):
        info = client.get_flight_info(desc, options=OPTS)
        assert info.schema == want.schema
        assert info.total_records == want.num_rows
        assert info.total_bytes > 0
        assert len(info.endpoints) >= 1
        parts = []
        for ep in info.endpoints:
            # no locations: read from the server that planned (any works)
            assert all(loc.uri.decode().startswith("grpc") for loc in ep.locations)
            parts.append(client.do_get(ep.ticket, options=OPTS).read_all())
        assert_tables_equal(pa.concat_tables(parts), want)


def test_get_flight_info_many_endpoints_pin_one_snapshot(start_server):
    # endpoints of ~1 byte: one endpoint per file
    srv = start_server(extra=["--endpoint-bytes", "1"])
    c = srv.client()
    for i in range(4):
        put(c, "snap/p", orders([i]))
    info = c.get_flight_info(flight.FlightDescriptor.for_path("snap", "p"), options=OPTS)
    assert len(info.endpoints) == 4
    assert info.ordered
    # a new version and an append after planning do not change what the
    # endpoints read: their tickets pin the version and the files
    put(c, "snap/p", orders([99]), mode="write")
    parts = [c.do_get(ep.ticket, options=OPTS).read_all() for ep in info.endpoints]
    assert_tables_equal(pa.concat_tables(parts), orders([0, 1, 2, 3]))
    assert get(c, "snap/p").column("id").to_pylist() == [99]


def test_get_flight_info_projection_and_version(client, keys):
    put(client, keys, orders([1, 2]), mode="write")
    put(client, keys, orders([3]), mode="write")
    info = client.get_flight_info(cmd(keys, version="v0", columns=["id"]), options=OPTS)
    assert info.schema == pa.schema([("id", pa.int64())])
    assert info.total_records == 2
    got = pa.concat_tables(client.do_get(ep.ticket).read_all() for ep in info.endpoints)
    assert got.column("id").to_pylist() == [1, 2]


def test_get_flight_info_partition_filter_prunes_endpoints(server, client, keys):
    t = pa.concat_tables([orders([1, 2], "eu"), orders([3], "us"), orders([4], "apac")])
    put(client, keys, t, mode="write", partition_by=["region"])
    info = client.get_flight_info(cmd(keys, partition={"region": ["eu", "apac"]}), options=OPTS)
    assert info.total_records == 3
    tickets = [json.loads(ep.ticket.ticket) for ep in info.endpoints]
    files = [f for tk in tickets for f in tk.get("files", [])]
    assert files and all("region=us" not in f for f in files)
    got = pa.concat_tables(client.do_get(ep.ticket).read_all() for ep in info.endpoints)
    assert sorted(got.column("id").to_pylist()) == [1, 2, 4]


# --- ListFlights --------------------------------------------------------------------


def test_list_flights_with_and_without_prefix(client, keys):
    base = keys.replace("/", "_")
    put(client, f"{base}/x/a", orders([1]))
    put(client, f"{base}/x/b", orders([1, 2]))
    put(client, f"{base}/xy/c", orders([1, 2, 3]))  # "x" must not match "xy"

    everything = {tuple(p.decode() for p in i.descriptor.path): i for i in client.list_flights(options=OPTS)}
    for name, n in (("x/a", 1), ("x/b", 2), ("xy/c", 3)):
        info = everything[(base, *name.split("/"))]
        assert info.descriptor.descriptor_type == flight.DescriptorType.PATH
        assert info.total_records == n
        assert info.schema == orders([1]).schema
        assert info.total_bytes > 0
        assert info.ordered

    for criteria in (f"{base}/x".encode(), f"{base}/x/".encode()):
        listed = [tuple(p.decode() for p in i.descriptor.path) for i in client.list_flights(criteria, options=OPTS)]
        assert listed == [(base, "x", "a"), (base, "x", "b")]
    listed = [i.descriptor.path for i in client.list_flights(base.encode(), options=OPTS)]
    assert len(listed) == 3
    assert list(client.list_flights(b"no_such_prefix_anywhere", options=OPTS)) == []

    # a listed FlightInfo's endpoints read the profile
    info = everything[(base, "xy", "c")]
    got = pa.concat_tables(client.do_get(ep.ticket).read_all() for ep in info.endpoints)
    assert_tables_equal(got, orders([1, 2, 3]))


# --- GetSchema ------------------------------------------------------------------------


def test_get_schema(client, keys):
    t0 = orders([1])
    t1 = pa.table({"id": pa.array([1], pa.int32()), "note": pa.array(["n"], pa.large_string())})
    put(client, keys, t0, mode="write")
    put(client, keys, t1, mode="write")
    assert client.get_schema(flight.FlightDescriptor.for_path(*keys.split("/"))).schema == t1.schema
    assert client.get_schema(cmd(keys, version="v0")).schema == t0.schema
    assert client.get_schema(cmd(keys, version=1)).schema == t1.schema


def test_schema_metadata_is_the_same_in_every_rpc(client, keys):
    sc = pa.schema(
        [pa.field("id", pa.int64(), nullable=False, metadata={"doc": "the id"}), pa.field("v", pa.string())],
        metadata={"owner": "team-a"},
    )
    t = pa.table({"id": [1, 2], "v": ["a", None]}, schema=sc)
    put(client, keys, t, mode="write")
    desc = flight.FlightDescriptor.for_path(*keys.split("/"))
    assert client.get_schema(desc).schema.equals(sc, check_metadata=True)
    assert client.get_flight_info(desc).schema.equals(sc, check_metadata=True)
    assert get(client, keys).schema.equals(sc, check_metadata=True)
    listed = [i for i in client.list_flights(keys.encode()) if i.descriptor.path == [p.encode() for p in keys.split("/")]]
    assert listed and listed[0].schema.equals(sc, check_metadata=True)


# --- ListActions / DoAction --------------------------------------------------------------


def test_list_actions(client):
    assert [a.type for a in client.list_actions(options=OPTS)] == ACTIONS
    assert all(a.description for a in client.list_actions())


def test_action_list_versions(client, keys):
    put(client, keys, orders([1, 2]), mode="write")
    put(client, keys, orders([3]))
    put(client, keys, orders([4, 5, 6]), mode="write", schema_version="2.0.0")
    res = action1(client, "list-versions", {"path": keys})
    assert res["path"] == keys
    assert res["latest"] == "v1"
    vs = {v["version"]: v for v in res["versions"]}
    assert list(vs) == ["v0", "v1"]
    assert (vs["v0"]["files"], vs["v0"]["rows"]) == (2, 3)
    assert (vs["v1"]["files"], vs["v1"]["rows"]) == (1, 3)
    for v in vs.values():
        assert v["bytes"] > 0
        assert v["created"].endswith("Z")


def test_action_lineage(client, keys):
    put(client, keys, orders([1]), mode="write", metadata={"run_id": "a"})
    put(client, keys, orders([2]), metadata={"run_id": "b"})
    put(client, keys, orders([3]), mode="write", metadata={"run_id": "c"})
    records = action(client, "lineage", {"path": keys})
    # one Result per commit record, oldest first
    assert [(r["version"], r["index"], r["mode"], r["metadata"]["run_id"]) for r in records] == [
        ("v0", 0, "write", "a"),
        ("v0", 1, "append", "b"),
        ("v1", 0, "write", "c"),
    ]
    for r in records:
        assert r["path"] == keys and r["committed"].endswith("Z") and r["files"][0]["sha256"]


def test_action_verify(server, client, keys):
    put(client, keys, orders([1, 2]), mode="write")
    put(client, keys, orders([3]))
    clean = action1(client, "verify", {"path": keys})
    heads = clean.pop("heads")
    assert clean == {"ok": True, "checked_files": 2, "problems": []}
    # the chain head: the last record's seq and hash, to anchor elsewhere
    lineage = [json.loads(r.body.to_pybytes()) for r in client.do_action(flight.Action("lineage", json.dumps({"path": keys}).encode()), options=OPTS)]
    assert [h["seq"] for h in heads] == [2] and lineage[-1]["seq"] == 2
    by_prefix = action1(client, "verify", {"prefix": keys.split("/")[0]})
    assert by_prefix["checked_files"] >= 2 and isinstance(by_prefix["problems"], list)
    everything = action1(client, "verify", {})
    assert everything["checked_files"] >= by_prefix["checked_files"]

    # a flipped byte is caught and named, relative to the data dir
    f = profile_dir(server, keys) / "v0/1.parquet"
    data = bytearray(f.read_bytes())
    data[len(data) // 2] ^= 0xFF
    f.chmod(0o644)
    f.write_bytes(bytes(data))
    bad = action1(client, "verify", {"path": keys})
    assert bad["ok"] is False
    assert [(p["kind"], p["path"]) for p in bad["problems"]] == [("mutated", f"{keys}/v0/1.parquet")]
    assert SECRET not in json.dumps(bad)
    # a missing file too
    f.unlink()
    bad = action1(client, "verify", {"path": keys})
    assert [(p["kind"], p["path"]) for p in bad["problems"]] == [("missing", f"{keys}/v0/1.parquet")]


def test_action_remove_old_versions(client, keys):
    for i in range(3):
        put(client, keys, orders([i]), mode="write")
    # within the default grace period (1 h) nothing superseded just now goes
    res = action1(client, "remove-old-versions", {"path": keys, "keep": 1})
    assert res["removed"] == []
    res = action1(client, "remove-old-versions", {"path": keys, "keep": 2, "grace_s": 0})
    assert res["removed"] == ["v0"]
    res = action1(client, "remove-old-versions", {"path": keys, "grace_s": 0})
    assert res["removed"] == ["v1"]
    assert [v["version"] for v in action1(client, "list-versions", {"path": keys})["versions"]] == ["v2"]
    assert get(client, keys).column("id").to_pylist() == [2]
    with pytest.raises(pa.ArrowInvalid, match="keep"):
        action(client, "remove-old-versions", {"path": keys, "keep": 0})


def test_action_sweep(server, client, keys):
    put(client, keys, orders([1]))
    vdir = profile_dir(server, keys) / "v0"
    stray = vdir / ".deadbeef.parquet.tmp"
    stray.write_bytes(b"PAR1 half a file")
    # a fresh temp is left alone by the default age (1 h) ...
    assert f"{keys}/v0/.deadbeef.parquet.tmp" not in action1(client, "sweep", {})["removed"]
    assert stray.exists()
    old = time.time() - 7200
    os.utime(stray, (old, old))
    res = action1(client, "sweep", {"older_than_s": 3600})
    assert f"{keys}/v0/.deadbeef.parquet.tmp" in res["removed"]
    assert not stray.exists()
    assert all(SECRET not in r for r in res["removed"])
    assert get(client, keys).num_rows == 1


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_action_break_lock(server, client, keys):
    put(client, keys, orders([1]))
    res = action1(client, "break-lock", {"path": keys})
    assert res["broken"] is False and "not locked" in res["reason"]

    lock = profile_dir(server, keys) / "manifest.json.write_lock"
    # a lock held by a live process (this one) is not broken
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": "2030-01-01T00:00:00Z"}))
    res = action1(client, "break-lock", {"path": keys})
    assert res["broken"] is False and res["reason"]
    assert lock.exists()
    lock.unlink()
    # a lock whose owner on this host is gone is broken
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": _dead_pid(), "time": "2030-01-01T00:00:00Z"}))
    res = action1(client, "break-lock", {"path": keys})
    assert res["broken"] is True, res
    assert not lock.exists()
    assert SECRET not in res["reason"]
    put(client, keys, orders([2]), mode="write")  # the profile is writable again


def test_action_compact(server, client, keys):
    for i in range(4):
        put(client, keys, orders([i, i + 10]))
    before = get(client, keys)
    res = action1(client, "compact", {"path": keys})
    assert res["path"] == keys and res["version"] == "v1" and res["rows"] == 8
    assert len(res["files"]) == 1
    assert sha256(profile_dir(server, keys) / res["files"][0]["path"]) == res["files"][0]["sha256"]
    assert_tables_equal(get(client, keys), before)
    assert action1(client, "list-versions", {"path": keys})["latest"] == "v1"


# --- errors --------------------------------------------------------------------------------


def _check_message(err: BaseException, *words: str) -> str:
    msg = str(err)
    assert SECRET not in msg, f"error shows the server's data dir: {msg}"
    assert "/tmp/" not in msg, f"error shows a server path: {msg}"
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"
    return msg


def test_error_not_found(client):
    with pytest.raises(pa.ArrowKeyError) as e:  # gRPC NOT_FOUND
        get(client, "no/such/profile")
    _check_message(e.value, "not found", "no/such/profile")
    with pytest.raises(pa.ArrowKeyError) as e:
        client.get_flight_info(flight.FlightDescriptor.for_path("no", "such"))
    _check_message(e.value, "not found", "no/such")
    with pytest.raises(pa.ArrowKeyError) as e:
        client.get_schema(flight.FlightDescriptor.for_path("no", "such"))
    _check_message(e.value, "not found")
    with pytest.raises(pa.ArrowKeyError) as e:
        action(client, "list-versions", {"path": "no/such"})
    _check_message(e.value, "not found", "no/such")


def test_error_version_not_found(client, keys):
    put(client, keys, orders([1]))
    with pytest.raises(pa.ArrowKeyError) as e:
        get(client, {"path": keys, "version": 9})
    _check_message(e.value, "v9", keys)


@pytest.mark.parametrize(
    "ticket, words",
    [
        (b"..", ['".."']),
        (b"a/../../etc", ["invalid key"]),
        (b"/abs/path", []),
        (b"a/.hidden", ["invalid key"]),
        (b"a=b", ["invalid key"]),
        (b"{not json", ["not valid JSON"]),
        (b'{"path": "a", "partiton": {}}', ["partiton"]),
        (b'{"path": "a", "version": "vX"}', ["version"]),
        (b"", ["empty"]),
    ],
)
def test_error_invalid_ticket(client, ticket, words):
    with pytest.raises(pa.ArrowInvalid) as e:  # gRPC INVALID_ARGUMENT
        client.do_get(flight.Ticket(ticket), options=OPTS).read_all()
    msg = _check_message(e.value, *words)
    assert "invalid argument" in msg


def test_error_invalid_descriptor(client):
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, flight.FlightDescriptor.for_path(".."), orders([1]))
    _check_message(e.value, "invalid key")
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, "a/b", orders([1]), mode="upsert")
    _check_message(e.value, "mode")
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, "a/b", orders([1]), partition_by=["region"])  # partition_by needs mode write
    _check_message(e.value, "partition_by")
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, "a/b", orders([1]), mode="write", partition_by=["nope"])
    _check_message(e.value, "nope")


def test_error_schema_mismatch_changes_nothing(server, client, keys):
    put(client, keys, orders([1]))
    before = sorted(p.name for p in (profile_dir(server, keys) / "v0").iterdir())
    bad = pa.table({"id": pa.array([2], pa.int64()), "other": pa.array(["x"])})
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, keys, bad)
    _check_message(e.value, "schema mismatch", "other", keys)
    wrong_type = orders([2]).set_column(0, "id", pa.array(["2"]))
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, keys, wrong_type)
    _check_message(e.value, "id")
    assert sorted(p.name for p in (profile_dir(server, keys) / "v0").iterdir()) == before
    assert_tables_equal(get(client, keys), orders([1]))
    # the same columns in another order, and a lossless widening, are accepted
    reordered = pa.table({"amount": [3.0], "id": pa.array([3], pa.int32()), "region": ["eu"]})
    put(client, keys, reordered)
    assert get(client, keys).column("id").to_pylist() == [1, 3]


def test_error_nested_profile(client, keys):
    put(client, keys, orders([1]))
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, keys + "/inner", orders([1]))
    _check_message(e.value, "nested profile")
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, keys.split("/")[0], orders([1]))
    _check_message(e.value, "nested profile")
    with pytest.raises(pa.ArrowKeyError) as e:  # reading above a profile: not a profile
        get(client, keys.split("/")[0])
    _check_message(e.value, "not found")


def test_error_format_mismatch(client, keys):
    put(client, keys, orders([1]))
    # gRPC FAILED_PRECONDITION: pyarrow has no class of its own for it
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, keys, orders([2]), mode="write", format="csv")
    msg = _check_message(e.value, "format mismatch", keys)
    assert "precondition" in msg


def test_error_unknown_action_and_bad_body(client):
    with pytest.raises(pa.ArrowNotImplementedError) as e:  # gRPC UNIMPLEMENTED
        action(client, "drop-everything", {})
    _check_message(e.value, "drop-everything")
    with pytest.raises(pa.ArrowInvalid) as e:
        client.do_action(flight.Action("verify", b"{nope"), options=OPTS).__next__()
    _check_message(e.value, "verify")
    with pytest.raises(pa.ArrowInvalid) as e:
        action(client, "list-versions", {"path": "a", "keep": 3})
    _check_message(e.value, "keep")
    with pytest.raises(pa.ArrowInvalid) as e:
        action(client, "lineage", {})
    _check_message(e.value, "path")


def test_error_lock_timeout_is_unavailable(start_server):
    srv = start_server(extra=["--lock-timeout", "500ms"])
    c = srv.client()
    put(c, "locked/p", orders([1]))
    lock = "locked/p/manifest.json.write_lock"
    write_behind(srv, lock, json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "time": "2030-01-01T00:00:00Z"}).encode())
    with pytest.raises(flight.FlightUnavailableError) as e:  # gRPC UNAVAILABLE
        put(c, "locked/p", orders([2]), mode="write")
    _check_message(e.value, "lock", "locked/p")
    write_behind(srv, lock, None)
    # the failed write committed nothing; the next one gets v1
    assert put(c, "locked/p", orders([3]), mode="write")["version"] in ("v1", "v2")
    assert get(c, "locked/p").column("id").to_pylist() == [3]


def test_error_put_too_large_is_resource_exhausted(start_server):
    srv = start_server(extra=["--max-put-bytes", "10000"])
    c = srv.client()
    # 1 MB of incompressible bytes in 100 batches, against a 10 kB limit
    big = pa.table({"x": pa.array([os.urandom(100) for _ in range(10_000)], pa.binary())})
    with pytest.raises(pa.ArrowInvalid) as e:  # gRPC RESOURCE_EXHAUSTED maps to ArrowInvalid in pyarrow
        put(c, "big/p", pa.Table.from_batches(big.to_batches(max_chunksize=100)))
    msg = _check_message(e.value)
    assert "resource exhausted" in msg
    with pytest.raises(pa.ArrowKeyError):
        get(c, "big/p")  # nothing committed


def test_error_message_too_large_is_resource_exhausted(start_server):
    srv = start_server(extra=["--max-recv-msg-size", "1000000"])
    c = srv.client()
    batch = pa.table({"x": pa.array([os.urandom(1000) for _ in range(2000)], pa.binary())})  # one 2 MB message
    with pytest.raises(pa.ArrowInvalid) as e:  # gRPC RESOURCE_EXHAUSTED
        put(c, "msg/p", batch)
    msg = _check_message(e.value)
    assert "resource exhausted" in msg
    assert "max-recv-msg-size" in msg or "larger than max" in msg, msg
    with pytest.raises(pa.ArrowKeyError):
        get(c, "msg/p")  # nothing committed
    put(c, "msg/p", pa.Table.from_batches(batch.to_batches(max_chunksize=200)))  # smaller batches pass
    assert get(c, "msg/p").num_rows == 2000


def test_error_messages_never_show_the_data_dir(server, client, keys):
    # a corrupt manifest: the error is Internal, and names no server path
    put(client, keys, orders([1]))
    write_behind(server, f"{keys}/manifest.json", b"{not json")
    with pytest.raises(flight.FlightInternalError) as e:  # gRPC INTERNAL
        get(client, keys)
    _check_message(e.value, "corrupt", f"{keys}/manifest.json")
    write_behind(server, f"{keys}/manifest.json", b'{"latest_data_dir": "v0"}')
    assert get(client, keys).num_rows == 1


# --- the wire codec ------------------------------------------------------------------

# Answers of these sizes (bytes) cross the server's marshal buffers' tiers:
# grpc-go's below 32 KiB, then reused, unzeroed buffers of 64 KiB to 1 MiB
# (internal/flightwire), then grpc-go's again.
WIRE_SIZES = [1000, 1100, 8000, 32700, 32768, 33000, 60000, 65536, 66000, 131072, 140000, 262144, 300000, 524288, 600000, 1000000, 1040000]


def _filtered_info(c: flight.FlightClient, path: str, marker: str, size: int) -> tuple[bytes, flight.FlightInfo]:
    """GetFlightInfo of path with an `in` filter of about size bytes, its
    values starting with marker: the filter comes back in the descriptor
    and the ticket, so the answer is about twice its size."""
    values, length = ["x"], 5
    while length < size // 2 - 80:
        values.append(f"{marker}{len(values):06d}" + "a" * 40)
        length += len(values[-1]) + 4  # quotes, comma, space
    raw = json.dumps({"path": path, "filter": {"col": "s", "op": "in", "value": values}}).encode()
    return raw, c.get_flight_info(flight.FlightDescriptor.for_command(raw), options=OPTS)


def test_answers_across_the_codec_tiers_are_exact(server, client, keys):
    """Red team round 38: answers of 1 KB to 1 MB, from four clients at once
    with a marker each, are each exactly their own (nothing of an earlier,
    longer answer in a reused buffer, nothing of another client's)."""
    put(client, keys, pa.table({"s": ["x", "y", "z"]}))
    markers = ["AAAA", "BBBB", "CCCC", "DDDD"]
    errors: list[str] = []

    def worker(marker: str, seed: int) -> None:
        c = server.client()
        sizes = WIRE_SIZES * 2
        random.Random(seed).shuffle(sizes)
        for size in sizes:
            raw, info = _filtered_info(c, keys, marker, size)
            ser = info.serialize()
            if info.descriptor.command != raw:
                errors.append(f"{marker} {size}: the descriptor differs from the one sent")
            for ep in info.endpoints:
                if json.loads(ep.ticket.ticket)["filter"] != json.loads(raw)["filter"]:
                    errors.append(f"{marker} {size}: the ticket's filter differs")
            errors.extend(f"{marker} {size}: {m}'s bytes in the answer" for m in markers if m != marker and m.encode() in ser)

    threads = [threading.Thread(target=worker, args=(m, i)) for i, m in enumerate(markers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:10]
