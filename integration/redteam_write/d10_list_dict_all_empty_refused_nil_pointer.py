"""r10: a valid list<dictionary> batch whose lists are all empty is refused with a recovered nil-pointer panic as the message.

Bug: a put of one batch whose list<dictionary<int32, string>> column holds
only empty lists (the dictionary child has 0 rows; the dictionary itself is
["a"]) — valid Arrow, e.g. a "tags" column where no row has tags yet — is
refused with INVALID_ARGUMENT "the data cannot be stored as Parquet: unknown
error type: runtime error: invalid memory address or nil pointer
dereference". That is a server panic (recovered) reported as the client's
fault, with no hint of what is wrong; the same table with a string list
column, or with one non-empty list, is accepted.

Severity: MEDIUM (valid data refused; unclear error exposing an internal
panic).

Expected: the put is acknowledged and reads back (two empty lists), or is
refused with a clear message naming the column and the unsupported shape.
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
        tags = pa.ListArray.from_arrays(pa.array([0, 0, 0], pa.int32()),
                                        D(pa.array([], pa.int32()), pa.array(["a"])))
        b = pa.record_batch([tags], names=["tags"])
        b.validate(full=True)
        try:
            put(c, "blog/drafts", [b], b.schema)
            t = get(c, "blog/drafts")
            print("acknowledged; read back", t.column("tags").to_pylist(), t.schema.field("tags").type)
            if t.column("tags").to_pylist() != [[], []] or not t.schema.equals(b.schema):
                bad.append("reads back different")
        except (fl.FlightError, pa.ArrowException) as e:
            msg = str(e)
            print("refused:", msg[:250])
            if "nil pointer" in msg or "runtime error" in msg or "unknown error type" in msg:
                bad.append("valid data refused with an internal panic as the message")
    finally:
        p.terminate(); p.wait(10); shutil.rmtree(d, ignore_errors=True)
    if bad:
        print("BUG:", "; ".join(bad)); return 1
    print("OK"); return 0


if __name__ == "__main__":
    sys.exit(main())
