"""p01: kill -9 of a server between a first put's commit and its manifest move
leaves an UNTAMPERED profile that `verify` reports as `missing` manifest with a
"committed data lost or altered" (DATA_LOSS-class) detail, and that `sweep`
refuses to clean ("skipped"), until some later put happens to commit to it.

Promise contradicted: format.md "Versions" / operations.md: "If a writer dies
between its record and the manifest move, the write is committed but the manifest
lags" -- a legitimate crash state; reliability.md's kill -9 procedure: after kills
`verify` may show only sweepable kinds (stale_temp, orphan, stale_lock), then
`sweep`, then `verify` clean.  Here verify shows `missing` (not sweepable), the
sweep skips the profile and verify stays unclean after sweep (+ break-lock).
Brief: a false DATA_LOSS-class alarm / "sweep no longer cleans" on an untampered
directory is at least MEDIUM.   Severity: MEDIUM.

How: a first put (append to a new profile); the moment its log segment appears the
server is SIGSTOPped and SIGKILLed, while manifest.json does not exist yet.
Exit 1 while the bug is present, 0 when fixed.
"""
import os, sys, json, socket, subprocess, time, tempfile, shutil, threading
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

def cli(*a):
    r = subprocess.run([Q] + list(a), capture_output=True, text=True, timeout=120)
    o = r.stdout; i = o.find("{")
    return r.returncode, (json.JSONDecoder().raw_decode(o[i:])[0] if i >= 0 else None)

def main():
    port = free_port()
    procs = []
    base = tempfile.mkdtemp(prefix="rt32-p01-")
    try:
        for attempt in range(20):
            d = os.path.join(base, "data%d" % attempt); os.mkdir(d)
            p, c = start(d, port); procs.append(p)
            seg = os.path.join(d, "p", ".log", "00000000000000000001.ndjson")
            man = os.path.join(d, "p", "manifest.json")
            t = pa.table({"x": list(range(1000))})
            def go():
                try:
                    w, r = c.do_put(fl.FlightDescriptor.for_command(json.dumps({"path": "p"})), t.schema)
                    w.write_table(t); w.done_writing(); r.read(); w.close()
                except Exception:
                    pass
            th = threading.Thread(target=go); th.start()
            hit = False; end = time.time() + 10
            while time.time() < end:
                if os.path.exists(seg):
                    os.kill(p.pid, 19)  # SIGSTOP: freeze it right after the commit point
                    hit = not os.path.exists(man)
                    os.kill(p.pid, 9); break
            p.kill(); p.wait(); th.join()
            if not hit:
                continue
            print("state reached on attempt %d: log segment 1 exists, manifest.json does not" % attempt)
            # a restarted server reads the profile (commit was real)
            p2, c2 = start(d, port); procs.append(p2)
            rows = c2.do_get(fl.Ticket(b'{"path":"p"}')).read_all().num_rows
            p2.terminate(); p2.wait()
            print("rows read after restart:", rows)
            rc1, v1 = cli("verify", "--data-dir", d, "--json")
            print("verify before sweep rc=%d problems=%s" % (rc1, [(x["kind"], x["path"]) for x in v1["problems"]]))
            cli("break-lock", "p", "--data-dir", d)
            rcs, sw = cli("sweep", "--data-dir", d, "--json", "--older-than", "0s")
            print("sweep:", json.dumps(sw))
            rc2, v2 = cli("verify", "--data-dir", d, "--json")
            probs = [(x["kind"], x["path"], x["detail"]) for x in v2["problems"]]
            print("verify after sweep+break-lock rc=%d problems=%s" % (rc2, probs))
            bad = [x for x in v1["problems"] if x["kind"] not in ("orphan", "stale_temp", "stale_lock")]
            skipped = (sw or {}).get("skipped") or []
            if bad or skipped or rc2 != 0:
                print("BUG: an untampered profile after kill -9 fails verify / is skipped by sweep")
                return 1
            print("OK")
            return 0
        print("could not reach the crash window in 20 attempts (inconclusive, treating as fixed)")
        return 0
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill(); p.wait()
        shutil.rmtree(base, ignore_errors=True)

if __name__ == "__main__":
    sys.exit(main())
