"""p07_late_lock_create_strands_lock_of_live_server: a manifest-lock create delivered late, after the server gave up on it, blocks the profile for 10 minutes.

Severity: MEDIUM.
Setup: quiver (--lock-timeout 3s) on versitygw through a proxy. A put's
conditional create of `p/q/manifest.json.write_lock` is sent, the connection
is reset, and the request is delivered to the service 4 s later; the retries
meanwhile get no answer (reset before forwarding; the same with 503s), so the
put fails UNAVAILABLE "whether it was written is unknown". Then the late
create lands: the lock now exists, with this server's write id, host and pid.
What happens: every later put -- the client's retry with the same
request_id included, on this server (the lock's owner, alive) and on any
other -- waits the lock timeout and fails "p/q is locked by another writer
... held by live process <this server's pid> ... breakable once older than
10m0s". The round-48 stranded-lock removal does not help: it ran (or gave
up) before the late request landed. Seen first in a 2-server soak (faults on
25% of lock requests): p/0 blocked 3.5 minutes by its own live server's lock.
Expected: a lock whose create went unanswered stays recorded as possibly
this process's until it is seen to be absent *after* any delayed request can
no longer land, or -- simpler -- a lock that names this live process (host,
boot, pid, start) and which it does not hold is taken back / removed by it.
Usage: python p07_late_lock_create_strands_lock_of_live_server.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
LOCK = re.compile(r"/manifest\.json\.write_lock\?x-id=PutObject")

def scenario(name, acts):
    global PROCS, DIRS
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log", extra=("--lock-timeout", "3s"))
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1]}))
    st = {"n": 0}
    def rule(req):
        if req.method == "PUT" and LOCK.search(req.target):
            i = st["n"]; st["n"] += 1
            return acts[i] if i < len(acts) else None
        return None
    px.rule = rule
    try:
        r = put(c, "p/q", pa.table({"v": [2]}), request_id="A")
        print(f"[{name}] put acknowledged", r["seq"])
    except fl.FlightError as e:
        print(f"[{name}] put:", e2s(e)[:200])
    px.rule = lambda r: None
    time.sleep(8)     # the late create has landed; storage healthy from now on
    ok = False
    for k in range(3):
        try:
            r = put(c, "p/q", pa.table({"v": [2]}), request_id="A")
            print(f"[{name}] retry acknowledged", r["seq"]); ok = True
            break
        except fl.FlightError as e:
            print(f"[{name}] retry {k}:", e2s(e)[:260])
            time.sleep(3)
    cleanup(); PROCS.clear(); DIRS.clear()
    return [] if ok else [f"[{name}] profile blocked by the server's own late lock (retries 8-25 s after the fault ended all fail)"]

def main():
    bugs = scenario("late create, retries reset", [("hold", 4)] + ["drop"] * 40)
    bugs += scenario("late create, retries 503", [("hold", 6)] + [("status", 503, "")] * 40)
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
