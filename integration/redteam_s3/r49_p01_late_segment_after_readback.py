"""p01_late_segment_after_readback: an unanswered segment PUT that lands after the read-back loses a committed append.

Severity: HIGH.
Setup: quiver on versitygw through a TCP proxy. A put's commit-point request
(the conditional create of `.log/<seq>.ndjson`) reaches the network, the
connection is then reset before the answer (the SDK sees "connection closed
before the response was complete") and the request is delivered to the
service a few seconds later (a slow middlebox / a request queued in the
service: a timed-out or reset request may still execute). Every retry of the
create goes the same way; the read-back GET of the segment overtakes them and
answers 404.
What happens: the server concludes "not committed", answers the put
UNAVAILABLE ("... the storage service did not answer: retry (a put with the
same request_id commits at most once)") and removes the put's data file
(v0/1.parquet). The delayed create then lands: the segment now holds a
commit record for the removed file. From then on every read of the profile
fails DATA_LOSS "committed file v0/1.parquet is missing", `verify` reports it
missing, and the careful client's retry with the same request_id is
*acknowledged* (replayed from the landed record) although its rows are gone.
Expected: an unanswered conditional create is never proven absent by a later
read (the request may still execute): either fence the sequence number before
deciding "not committed" (e.g. create the segment itself / a tombstone
conditionally so the late create gets 412), or treat it as unknown and keep
the files (as for an unreadable read-back), so that a landed record never
names a removed file and a replayed retry never acknowledges lost rows.
Usage: python p01_late_segment_after_readback.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
SEG = re.compile(r"/\.log/\d+\.ndjson")

def main():
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    st = {"on": True}
    def rule(req):
        # every create of a log segment: sent, connection reset, delivered 4 s later
        if st["on"] and SEG.search(req.target) and req.method == "PUT":
            return ("hold", 4)
        return None
    px.rule = rule
    try:
        r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
        print("first put acknowledged", r["seq"])
    except fl.FlightError as e:
        print("first put:", e2s(e))
    st["on"] = False
    time.sleep(7)                       # the delayed creates land
    bugs = []
    try:
        r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")   # the careful client's retry
        print("retry acknowledged: seq", r["seq"], r["files"])
    except fl.FlightError as e:
        print("retry:", e2s(e))
    try:
        rows = sorted(get(c, "p/q").column("v").to_pylist())
        print("rows", rows)
        if rows != [1, 2, 3, 4]:
            bugs.append(f"rows {rows}")
    except fl.FlightError as e:
        bugs.append("read: " + e2s(e))
    v = action(c, "verify", {})[0]
    print("verify", v)
    if not v["ok"]:
        bugs.append("verify: " + json.dumps(v["problems"]))
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
