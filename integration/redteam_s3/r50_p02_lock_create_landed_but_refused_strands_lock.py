"""p02_lock_create_landed_but_refused_strands_lock: a manifest-lock create that landed but was answered 412 (or 403) blocks the profile for the stale limit.

Severity: MEDIUM.
Setup: quiver on versitygw through a proxy. The conditional create of
`<profile>/manifest.json.write_lock` reaches the service and lands; the answer
the server gets is 412 PreconditionFailed (an intermediary that retried the
create upstream, its second try meeting its first) or 403.
What happens: the server does not look at whose lock it is (the lock carries
its write id and its host/pid bytes): it reports "manifest lock timeout: p/q
is locked by another writer" (or UNAVAILABLE refused), and then every later
put to the profile, on this server and every other, waits --lock-timeout and
fails "locked by another writer" -- its own lock, which it never releases
and whose background removal of stranded locks (round 48) is not applied
because the create was "answered". The profile stays blocked until the lock
is stale (10 minutes) or an operator runs break-lock.
Expected: a 412 on the lock create should be followed by a check of the
lock's write id / bytes (as after an unanswered attempt); a lock found to be
this process's is taken (or recorded as stranded and removed), so the
client's retry succeeds.
Usage: python p02_lock_create_landed_but_refused_strands_lock.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
LOCK = re.compile(r"/manifest\.json\.write_lock\?")
E412 = '<?xml version="1.0"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>'
E403 = '<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'

def scenario(name, answer):
    global PROCS, DIRS
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log", extra=("--lock-timeout", "3s"))
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    st = {"n": 0}
    def rule(req):
        if LOCK.search(req.target) and req.method == "PUT":
            st["n"] += 1
            return ("fwd_status",) + answer if st["n"] == 1 else None
        return None
    px.rule = rule
    try:
        r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
        print(f"[{name}] put acknowledged: seq", r["seq"])
    except fl.FlightError as e:
        print(f"[{name}] first attempt:", e2s(e)[:200])
    px.rule = lambda req: None
    time.sleep(15)   # storage healthy again; give the background clean-up time
    ok = False
    for i in range(3):
        try:
            r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
            print(f"[{name}] retry {i} acknowledged: seq", r["seq"]); ok = True
            break
        except fl.FlightError as e:
            print(f"[{name}] retry {i} (after {15 + 4 * i} s):", e2s(e)[:200])
    if not ok:
        bugs.append(f"[{name}] the profile stays locked by the server's own lock ({15 + 4 * 3} s after the storage recovered)")
    try:
        rows = sorted(get(c, "p/q").column("v").to_pylist())
        if ok and rows != [1, 2, 3, 4]:
            bugs.append(f"[{name}] rows {rows}")
    except fl.FlightError as e:
        bugs.append(f"[{name}] read: " + e2s(e)[:200])
    cleanup(); PROCS.clear(); DIRS.clear()
    return bugs

def main():
    bugs = scenario("lock create landed, answered 412", (412, E412))
    bugs += scenario("lock create landed, answered 403", (403, E403))
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
