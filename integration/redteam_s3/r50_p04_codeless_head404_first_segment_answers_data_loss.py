"""p04_codeless_head404_first_segment_answers_data_loss: one codeless 404 to the HEAD of `.log/<first>.ndjson` makes a put fail DATA_LOSS.

Severity: LOW.
Setup: quiver on versitygw through a proxy. During an append, the HEAD the
store sends for the profile's first log segment (`.log/00000000000000000001.ndjson`)
is answered 404 without a body once (as an intermediary would; a HEAD's
answer has no body, so there is no error code).
What happens: the put is answered DATA_LOSS "committed data lost or altered:
p/q: the commit log's first segment (...) is gone (the log was altered under
this server): records were removed; nothing was committed". The segment is
there; the client's immediate retry succeeds. Clients (and alerting) treat
DATA_LOSS as permanent damage, not as "retry". This is the consequence of the
known gap "a HEAD-only codeless 404 still reads as absence" (round 49, noticed
and left), which the docs otherwise describe as "never decisive alone".
Expected: a codeless HEAD 404 of a segment the store has seen should be
confirmed (a GET or a listing naming the key itself) before the log is
declared altered; otherwise UNAVAILABLE.
Usage: python p04_codeless_head404_first_segment_answers_data_loss.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
FIRST = re.compile(r"/\.log/0+1\.ndjson$")

def main():
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
    st = {"n": 0}
    def rule(req):
        if req.method == "HEAD" and FIRST.search(req.target):
            st["n"] += 1
            return ("status", 404, "") if st["n"] == 1 else None
        return None
    px.rule = rule
    try:
        r = put(c, "p/q", pa.table({"v": [5]}), request_id="a3")
        print("put acknowledged: seq", r["seq"])
    except fl.FlightError as e:
        s = e2s(e)
        print("put:", s[:300])
        if "data loss" in s.lower() or "internal" in s.lower():
            bugs.append("put answered: " + s[:200])
    px.rule = lambda req: None
    r = put(c, "p/q", pa.table({"v": [5]}), request_id="a3")
    rows = sorted(get(c, "p/q").column("v").to_pylist())
    print("retry seq", r["seq"], "rows", rows)
    if rows != [1, 2, 3, 4, 5]:
        bugs.append(f"rows {rows}")
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
