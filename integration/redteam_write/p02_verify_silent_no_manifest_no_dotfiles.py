"""p02: a profile whose manifest.json was deleted and whose dot-files were not
restored (.log/, .quiver.kind, .version.json, claims gone) -- its v0 holding the
Parquet files of TWO acknowledged puts (a write and an append, distinct
`quiver.put` ids) -- is reported CLEAN by `quiver verify` (exit 0, no problems),
although the server itself knows the data is committed-but-unreachable: a put to
the profile is refused DATA_LOSS "v0 holds the files of 2 puts, so it was
committed, yet no manifest or commit record names it".  `sweep` also reports
nothing (no `skipped` entry).  The acknowledged rows are invisible to every Quiver
reader and listing, and the audit tool says all is well.

Promise contradicted: format.md "Sweep": a directory with no manifest and no log
whose version holds the files of two puts "is kept by sweep ... verify reports it
`chain_broken`"; operations.md "Restore dot-files too": after a copy that skipped
hidden files "`verify` reports `chain_broken` or `mutated`".  With the
`.version.json` kept, verify does report chain_broken; without it (the very
"skipped dot-files" restore), it is silent.   Severity: MEDIUM (verify
false-OK over acknowledged, unreadable data; nothing is deleted).

Exit 1 while the bug is present, 0 when fixed.
"""
import os, sys, json, socket, subprocess, time, tempfile, shutil
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt32/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in range(19500, 19600):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port")

def start(d, port):
    p = subprocess.Popen([Q, "serve", "--addr", "127.0.0.1:%d" % port, "--data-dir", d],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            c = fl.connect("grpc://127.0.0.1:%d" % port); list(c.list_actions()); return p, c
        except Exception:
            time.sleep(0.05)
    p.kill(); raise SystemExit("server did not start")

def put(c, path, t, **kw):
    kw["path"] = path
    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps(kw)), t.schema)
    w.write_table(t); w.done_writing(); r.read(); w.close()

def cli(*a):
    r = subprocess.run([Q] + list(a), capture_output=True, text=True, timeout=120)
    o = r.stdout; i = o.find("{")
    return r.returncode, (json.JSONDecoder().raw_decode(o[i:])[0] if i >= 0 else None)

def main():
    port = free_port(); procs = []
    base = tempfile.mkdtemp(prefix="rt32-p02-"); d = os.path.join(base, "data"); os.mkdir(d)
    try:
        p, c = start(d, port); procs.append(p)
        t = pa.table({"x": [1, 2, 3]})
        put(c, "sales/orders", t, mode="write")
        put(c, "sales/orders", t, mode="append")
        p.terminate(); p.wait()
        prof = os.path.join(d, "sales", "orders")
        # tamper: manifest deleted, and a restore that skipped every dot-file
        os.remove(os.path.join(prof, "manifest.json"))
        for root, dirs, files in os.walk(d, topdown=False):
            for f in files:
                if f.startswith("."):
                    os.remove(os.path.join(root, f))
            for x in dirs:
                if x.startswith("."):
                    shutil.rmtree(os.path.join(root, x))
        left = sorted(os.path.relpath(os.path.join(r, f), d) for r, _, fs in os.walk(d) for f in fs)
        print("on disk:", left)
        rcs, sw = cli("sweep", "--data-dir", d, "--json", "--older-than", "0s")
        print("sweep:", json.dumps(sw))
        rcv, v = cli("verify", "--data-dir", d, "--json")
        print("verify rc=%d problems=%s" % (rcv, [(x["kind"], x["path"]) for x in v["problems"]]))
        p, c = start(d, port); procs.append(p)
        try:
            put(c, "sales/orders", t, mode="append"); perr = None
        except Exception as e:
            perr = str(e).split(". gRPC client")[0]
        p.terminate(); p.wait()
        print("put to the profile:", perr or "accepted")
        if perr and "data loss" in perr.lower() and rcv == 0:
            print("BUG: the server refuses puts (DATA_LOSS, committed data unreachable) but verify is clean")
            return 1
        if rcv == 0:
            print("BUG: verify clean over 2 acknowledged puts' unreachable files")
            return 1
        print("OK: verify reports the damage")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill(); p.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
