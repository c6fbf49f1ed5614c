"""r07: `quiver get` panics (Go stack trace) on any profile with a dictionary column.

Bug: `quiver get PROFILE` writes CSV when stdout is a pipe (and with
`-o x.csv`, `--limit`, `--where`). For a profile with a
dictionary<int32, string> column (e.g. anything from a pandas categorical),
the client crashes with `panic: arrow/csv: field has unsupported data type
dictionary<values=utf8, indices=int32, ordered=false>`, exit status 2, a
goroutine dump and the build machine's module paths on stderr — instead of
the documented one-line `quiver: <message>` error, or (better) the decoded
values. `quiver get sales/orders --version v3 | head` from the README fails
this way for every such profile.

Severity: MEDIUM (the documented fetch command cannot export dictionary
columns to CSV; crash instead of an error; path-revealing stack trace).

Expected: CSV with the dictionary values decoded (as for a string column),
or a one-line `quiver: …` error with a non-zero status; never a panic.
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
    SERVER_ADDR.append(addr)
    return p, d, data, fl.connect("grpc://" + addr)


SERVER_ADDR = []


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
        b = pa.record_batch([D(pa.array([0, 1, 0], pa.int32()), pa.array(["eu", "us"])), pa.array([1, 2, 3])],
                            names=["region", "x"])
        put(c, "sales/orders", [b], b.schema)
        addr = SERVER_ADDR[0]
        out = os.path.join(d, "o.csv")
        for args in (["get", "sales/orders"], ["get", "sales/orders", "-o", out]):
            r = subprocess.run([QUIVER, *args, "--server", addr], capture_output=True, text=True, timeout=60)
            print(args, "rc", r.returncode, "stderr:", r.stderr.strip().splitlines()[:1])
            text = r.stdout if len(args) == 2 else (open(out).read() if os.path.exists(out) else "")
            if "panic" in r.stderr or "goroutine" in r.stderr:
                bad.append("%s panicked" % " ".join(args))
            elif r.returncode == 0 and not ("eu" in text and "us" in text):
                bad.append("%s: CSV lacks the values" % " ".join(args))
    finally:
        p.terminate(); p.wait(10); shutil.rmtree(d, ignore_errors=True)
    if bad:
        print("BUG:", "; ".join(bad)); return 1
    print("OK"); return 0


if __name__ == "__main__":
    sys.exit(main())
