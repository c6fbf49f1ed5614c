"""r09: partitioned put, list<dictionary> column, a partition whose lists are all empty/null: acknowledged, then every read panics.

Bug: a write partitioned by `p` with a list<dictionary<int32, string>>
column ("tags"), where the rows of one partition hold only empty (or null)
lists — e.g. tags [["a"], []] with p [0, 1] — is acknowledged, but every
DoGet of the profile fails with INTERNAL "internal error (see server log)";
the log shows a recovered nil-pointer panic: "read …: join batches:
arrow/concat: runtime error: invalid memory address or nil pointer
dereference". `compact` fails too ("panic (a server bug): runtime error:
invalid memory address or nil pointer dereference"), so the version can never
be read or repaired through Quiver. (pyarrow reads the files.)

Severity: CRITICAL (acknowledged data unreadable through Quiver; a server
panic on every read; an everyday shape — a tags column on a day without tags).

Expected: DoGet returns the rows ([["a"], []] with their p), or the put is
refused with a clear error and nothing committed.
"""
import os, sys, json, subprocess, tempfile, shutil, glob
import numpy as np
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq

QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))


def start_server():
    d = tempfile.mkdtemp(prefix="quiver_rt_", dir="/tmp")
    data = os.path.join(d, "data")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", data, "--addr", "127.0.0.1:0"],
                         stdout=subprocess.PIPE, stderr=open(os.path.join(d, "server.log"), "w"), text=True)
    line = p.stdout.readline()
    addr = line.strip().split(" on ")[-1]
    return p, d, data, fl.connect("grpc://" + addr)


def put(client, path, batches, schema, mode="write", **kw):
    cmd = dict(path=path, mode=mode, **kw)
    w, r = client.do_put(fl.FlightDescriptor.for_command(json.dumps(cmd)), schema)
    for b in batches:
        w.write_batch(b)
    w.done_writing()
    res = r.read()
    w.close()
    return json.loads(res.to_pybytes())


def get(client, path, **t):
    t["path"] = path
    return client.do_get(fl.Ticket(json.dumps(t).encode())).read_all()


def latest_files(data, path):
    prof = os.path.join(data, path)
    v = json.load(open(os.path.join(prof, "manifest.json")))["latest_data_dir"]
    return sorted(glob.glob(os.path.join(prof, v, "**", "*.parquet"), recursive=True))


def main():
    p, d, data, c = start_server()
    bad = []
    try:
        D = pa.DictionaryArray.from_arrays
        tags = pa.ListArray.from_arrays(pa.array([0, 1, 1], pa.int32()),
                                        D(pa.array([0], pa.int32()), pa.array(["a"])))
        b = pa.record_batch([tags, pa.array([0, 1], pa.int32())], names=["tags", "p"])
        try:
            put(c, "blog/posts", [b], b.schema, partition_by=["p"])
        except (fl.FlightError, pa.ArrowException) as e:
            print("refused (acceptable):", str(e)[:200])
            return 0
        print("put acknowledged")
        for label in ("DoGet", "after compact"):
            if label == "after compact":
                try:
                    list(c.do_action(fl.Action("compact", json.dumps({"path": "blog/posts"}).encode())))
                except (fl.FlightError, pa.ArrowException) as e:
                    print("compact failed:", str(e)[:150])
                    bad.append("compact failed")
                    break
            try:
                t = get(c, "blog/posts").sort_by("p")
                if t.column("tags").to_pylist() != [["a"], []] or t.column("p").to_pylist() != [0, 1]:
                    bad.append(label + " reads back different: %r" % t.to_pydict())
                else:
                    print(label, "ok")
            except (fl.FlightError, pa.ArrowException) as e:
                print(label, "failed:", str(e)[:150])
                bad.append(label + " unreadable")
    finally:
        p.terminate(); p.wait(10); shutil.rmtree(d, ignore_errors=True)
    if bad:
        print("BUG:", "; ".join(bad)); return 1
    print("OK"); return 0


if __name__ == "__main__":
    sys.exit(main())
