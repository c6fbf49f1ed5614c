#!/usr/bin/env python3
"""h01 (MEDIUM): the commit log (.log/) of a profile is deleted while a server runs.
The server keeps acknowledging puts (seq 3, 4, ...) on top of the vanished history and
keeps serving reads from memory, while a fresh server (or the same one after a restart)
declares the whole profile DATA_LOSS - including the puts it just acknowledged.
Expected (docs: a truncated/corrupt commit log is DATA_LOSS; sweep "touches nothing in a
profile whose chain is broken"; a commit checks its files still exist): the put is refused
(DATA_LOSS / not acknowledged) instead of being reported as committed.
Exit 0 = bug absent, 1 = bug present."""
import os, re, sys, json, shutil, tempfile, subprocess
import pyarrow as pa, pyarrow.flight as fl
QUIVER = os.environ.get("QUIVER", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bin", "quiver"))

def start(d):
    err = tempfile.NamedTemporaryFile("w+", delete=False, dir="/tmp", prefix="h01err")
    p = subprocess.Popen([QUIVER, "serve", "--data-dir", d, "--addr", "127.0.0.1:0", "--lock-timeout", "2s"],
                         stdout=subprocess.PIPE, stderr=err, text=True)
    m = re.search(r"on (\S+)$", p.stdout.readline().strip())
    return p, fl.connect("grpc://" + m.group(1)), err.name

def put(c, path, t):
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": path})), t.schema)
    w.write_table(t); w.done_writing(); res = r.read(); w.close()
    return json.loads(res.to_pybytes())

def main():
    d = tempfile.mkdtemp(prefix="h01")
    p, c, errf = start(d)
    t = pa.table({"a": [1, 2]})
    put(c, "p", t); put(c, "p", t)
    shutil.rmtree(os.path.join(d, "p", ".log"))       # the profile's history disappears
    acked = []
    for _ in range(2):
        try:
            acked.append(put(c, "p", t)["seq"])
        except Exception as e:
            print("put refused:", str(e).split(". gRPC")[0][:200])
    print("puts acknowledged after the log was deleted:", acked)
    p.terminate(); p.wait()
    panic = "panic" in open(errf).read()
    p2, c2, errf2 = start(d)
    try:
        n = c2.do_get(fl.Ticket(b"p")).read_all().num_rows
        fresh = "served %d rows" % n
        lost = False
    except Exception as e:
        fresh = str(e).split(". gRPC")[0][:200]
        lost = "data loss" in fresh.lower()
    print("fresh server reading the profile:", fresh)
    p2.terminate(); p2.wait()
    panic = panic or "panic" in open(errf2).read()
    if panic:
        print("PANIC in server stderr"); return 1
    if acked and lost:
        print("BUG: %d put(s) acknowledged as committed into a profile that a restarted server declares DATA_LOSS" % len(acked))
        return 1
    print("OK")
    return 0

if __name__ == "__main__":
    sys.exit(main())
