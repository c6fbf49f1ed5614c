"""p06_lost_lock_answer_blocks_profile: a manifest-lock create whose answer is lost leaves a lock nobody releases; the profile refuses every put for --lock-stale-after (10 min).

Severity: MEDIUM.
Setup: quiver on versitygw through a proxy; profile p/q exists. One put's
conditional create of `p/q/manifest.json.write_lock` lands, but its answer
is lost, and the SDK's retries are lost too (a ~1 s network blip) -- or the
retry is answered with a refusal (403).
What happens: the put fails UNAVAILABLE (fine), but the lock object it
created stays. The server does not recognise it as its own: every later put
to p/q, through this server or any other, waits --lock-timeout and fails
UNAVAILABLE "manifest lock timeout: p/q is locked by another writer", the
same request_id retry included. `break-lock` refuses (the owner process is
alive: it is this very server), `verify` reports ok (no stale_lock), sweep
does nothing. The profile stays unwritable until --lock-stale-after (10 min
by default) or a restart of the server, although no writer is running.
Expected: after an unanswered lock create, the server reads the lock back
(its write id says whether it is its own) and removes its own lock, or
recognises a lock naming its own process and a lock id it does not hold as
abandoned, so that writes resume at once after the network recovers.
Usage: python p06_lost_lock_answer_blocks_profile.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
def main():
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log", ["--lock-timeout", "3s"])
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    st = {"on": True}
    # a network blip: every attempt of the lock create lands, every answer is lost
    px.rule = lambda req: "lost" if st["on"] and "write_lock" in req.target and req.method == "PUT" else None
    try:
        put(c, "p/q", pa.table({"v": [4]}), request_id="a2"); print("blip put acknowledged")
    except fl.FlightError as e:
        print("blip put:", e2s(e)[:200])
    st["on"] = False                      # the network is healthy again
    t0 = time.time()
    ok = False
    while time.time() - t0 < 30:
        try:
            r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
            print(f"retry committed after {time.time() - t0:.1f}s: seq", r["seq"]); ok = True; break
        except fl.FlightError as e:
            print(f"  t+{time.time() - t0:4.1f}s retry:", e2s(e)[:140])
    if not ok:
        bugs.append("30 s after the network recovered every put to p/q still fails 'locked by another writer'")
        try:
            print("break-lock:", action(c, "break-lock", {"path": "p/q"}))
        except fl.FlightError as e:
            print("break-lock:", e2s(e)[:200])
        print("verify:", action(c, "verify", {})[0])
        print("lock object:", open(os.path.join(root, "bkt/pfx/p/q/manifest.json.write_lock")).read()[:300])
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
