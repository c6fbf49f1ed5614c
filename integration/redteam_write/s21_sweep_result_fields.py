"""s21: the `sweep` action's result omits the documented `skipped` and `settled` fields when they are empty.

What is wrong: on a clean data directory, `sweep {"older_than_s": 0}` answers `{"removed": []}`
(and `quiver sweep --json` prints the same). protocol.md's action table and format.md ("Sweep") document
the result as `{"removed": [...], "skipped": [{"kind","path","detail"}], "settled": [...]}`; verify, by
contrast, always carries `problems: []`. A client reading `result["skipped"]` (e.g. a monitor that alerts
when sweep skips a damaged profile) gets a KeyError in the normal, clean case. Round 33's q02 fixed the
same class of gap ("lacked the documented settled") only where the list is non-empty, it seems.
Severity: LOW (API contract / robustness of clients; no data at risk).
Exits 1 while the fields are missing, 0 once both are present (as lists).
"""
import json, os, random, shutil, signal, socket, subprocess, sys, tempfile, time
import pyarrow as pa, pyarrow.flight as fl

Q = os.environ.get("QUIVER", "/work/rtrun/rt37/quiver")

def free_port():
    if os.environ.get("PORT"):
        return int(os.environ["PORT"])
    for p in random.sample(range(19600, 19700), 100):
        s = socket.socket()
        try:
            s.bind(("127.0.0.1", p)); s.close(); return p
        except OSError:
            s.close()
    raise SystemExit("no free port")

def main():
    base = tempfile.mkdtemp(prefix="rt37-s21-")
    d = os.path.join(base, "data"); os.makedirs(d)
    port = free_port()
    log = open(os.path.join(base, "server.log"), "wb")
    p = subprocess.Popen([Q, "serve", "--addr", f"127.0.0.1:{port}", "--data-dir", d], stdout=log, stderr=log)
    try:
        c = None
        for _ in range(200):
            try:
                c = fl.connect(f"grpc://127.0.0.1:{port}"); list(c.list_actions()); break
            except Exception:
                if p.poll() is not None: raise SystemExit("server died")
                time.sleep(0.05)
        t = pa.table({"id": [1, 2, 3]})
        w, r = c.do_put(fl.FlightDescriptor.for_path("a", "b"), t.schema)
        w.write_table(t); w.done_writing(); r.read(); w.close()
        res = [json.loads(x.body.to_pybytes()) for x in c.do_action(fl.Action("sweep", json.dumps({"older_than_s": 0}).encode()))][0]
        print("sweep action result:", res)
        c.close()
    finally:
        p.send_signal(signal.SIGKILL); p.wait()
    cli = subprocess.run([Q, "sweep", "--data-dir", d, "--json", "--older-than", "0s"], capture_output=True, text=True)
    print("quiver sweep --json:", cli.stdout.strip().replace("\n", " "), cli.stderr.strip()[:200])
    shutil.rmtree(base, ignore_errors=True)
    missing = [k for k in ("removed", "skipped", "settled") if not isinstance(res.get(k), list)]
    try:
        cj = json.loads(cli.stdout)
        missing += ["cli:" + k for k in ("removed", "skipped", "settled") if not isinstance(cj.get(k), list)]
    except Exception:
        pass
    if missing:
        print("BUG: documented fields missing:", missing); sys.exit(1)
    print("OK: all documented fields present"); sys.exit(0)

main()
