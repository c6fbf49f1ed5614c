"""z03: a partitioned write of a column Parquet cannot store (string_view, binary_view, list_view,
run_end_encoded, sparse union, also nested in a struct or list) is answered INTERNAL by the spill.

What is wrong: with the default `--spill-dir` (the spill is on), a `mode: "write"` put with
`partition_by` whose schema holds such a column fails with INTERNAL "internal error (see server
log)"; the log's cause is the spill's split, "gather rows: not implemented: function 'array_take'
has no kernel matching input types (string_view, int32)". The same put unpartitioned, or
partitioned with `--spill-dir off`, gets INVALID_ARGUMENT "the schema cannot be stored as
Parquet: not implemented: support for STRING_VIEW" naming the profile. The client's bad input is
thus reported as a server fault (and counted as one: the documented alert on Internal fires),
without saying what is wrong.

Promise contradicted: protocol.md "Errors" (`InvalidArgument` for a schema mismatch / bad input;
`Internal` is "anything else" and the one client-caused Internal is the cut message), operations.md
Limits ("Each limit refuses with a status that names what was exceeded"), the round's invariant
"bad input gets a clear error naming what was wrong".
Severity: LOW-MEDIUM (wrong status / no explanation; nothing is written).

Exit 1 while the bug is present, 0 when fixed.
"""
import json, os, pathlib, shutil, socket, subprocess, sys, tempfile
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", str(pathlib.Path(__file__).resolve().parents[2] / "bin" / "quiver"))


def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port in 19500-19599")


def main():
    data = tempfile.mkdtemp(prefix="rt25-z03-", dir="/tmp")
    port = free_port()
    srv = subprocess.Popen(["nice", "-n", "15", Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", data],
                           stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    bad = 0
    try:
        line = srv.stdout.readline()
        if b"serving" not in line:
            raise SystemExit(f"server did not start: {line!r}")
        c = fl.connect(f"grpc://127.0.0.1:{port}")
        cases = {
            "string_view": pa.array(["a" * 20, "b", None, "c"], pa.string_view()),
            "binary_view": pa.array([b"a" * 20, b"b", None, b"c"], pa.binary_view()),
            "struct<string_view>": pa.array([{"a": "x"}] * 4, pa.struct([("a", pa.string_view())])),
            "run_end_encoded": pa.RunEndEncodedArray.from_arrays([2, 4], ["a", "b"]),
            "sparse_union": pa.UnionArray.from_sparse(pa.array([0, 1, 0, 1], pa.int8()),
                                                      [pa.array([1, 2, 3, 4]), pa.array(["a", "b", "c", "d"])]),
        }
        for i, (name, arr) in enumerate(cases.items()):
            t = pa.table({"id": [1, 2, 3, 4], "p": ["x", "y", "x", "y"], "c": arr})
            out = {}
            for kind, cmd in (("unpartitioned", {"path": f"u/c{i}", "mode": "write"}),
                              ("partitioned", {"path": f"p/c{i}", "mode": "write", "partition_by": ["p"]})):
                try:
                    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), t.schema)
                    w.write_table(t); w.done_writing(); r.read(); w.close()
                    out[kind] = "ACCEPTED"
                except pa.ArrowException as e:
                    m = str(e)
                    code = "INTERNAL" if "internal error" in m.lower() else ("INVALID_ARGUMENT" if "invalid argument" in m.lower() else "other")
                    out[kind] = code + ": " + m.split("message: ", 1)[-1].split(". gRPC")[0][:110]
            print(f"{name:22s} unpartitioned -> {out['unpartitioned']}")
            print(f"{'':22s} partitioned   -> {out['partitioned']}")
            if out["partitioned"].startswith("INTERNAL"):
                bad += 1
        if bad:
            print(f"BUG: {bad} partitioned writes of unsupported types answered INTERNAL instead of INVALID_ARGUMENT")
            return 1
        print("OK")
        return 0
    finally:
        if srv.poll() is None:
            srv.kill(); srv.wait()
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
