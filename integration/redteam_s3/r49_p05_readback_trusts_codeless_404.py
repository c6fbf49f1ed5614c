"""p05_readback_trusts_codeless_404: the commit read-back takes a 404 without an S3 error code as "not committed" and deletes committed files.

Severity: MEDIUM.
Setup: quiver on versitygw through a proxy. A put's segment create lands on
every attempt but every answer is lost (connection reset); the read-back
GET of the segment is then answered HTTP 404 with no body -- not S3's answer
(S3 answers a GET of a missing key 404 *with* <Code>NoSuchKey</Code>; only a
HEAD's 404 has no body) but an intermediary's: an ingress/load balancer
briefly without a route, a proxy in front of the service.
What happens: the server concludes the segment is absent, answers the put
UNAVAILABLE "... the storage service did not answer: retry (a put with the
same request_id commits at most once)" and deletes the put's data file. The
segment is there: every read of the profile then fails DATA_LOSS "committed
file v0/1.parquet is missing", `verify` reports it, and the retry with the
same request_id is acknowledged (replayed) with its rows gone.
Expected: the read-back that decides whether files may be deleted after an
unanswered commit should accept only a decisive absence (NoSuchKey on a GET);
any other answer, a codeless 404 included, is "unknown": answer "whether it
committed is unknown" and keep the files.
Usage: python p05_readback_trusts_codeless_404.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
SEG = re.compile(r"/\.log/\d+\.ndjson")

def main():
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    st = {"on": True, "seen": False}
    def rule(req):
        if not st["on"]:
            return None
        if SEG.search(req.target) and req.method == "PUT":
            st["seen"] = True
            return "lost"                                   # lands; the answer is lost
        if st["seen"] and SEG.search(req.target) and req.method in ("GET", "HEAD"):
            return ("status", 404, "")                      # an intermediary's 404, no S3 code
        return None
    px.rule = rule
    try:
        r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
        print("first put acknowledged seq", r["seq"])
    except fl.FlightError as e:
        print("first put:", e2s(e)[:250])
    st["on"] = False
    try:
        r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
        print("retry acknowledged: seq", r["seq"], [f["path"] for f in r["files"]])
    except fl.FlightError as e:
        print("retry:", e2s(e)[:200])
    try:
        rows = sorted(get(c, "p/q").column("v").to_pylist())
        print("rows", rows)
        if rows != [1, 2, 3, 4]:
            bugs.append(f"rows {rows}")
    except fl.FlightError as e:
        bugs.append("read: " + e2s(e)[:200])
    v = action(c, "verify", {})[0]
    if not v["ok"]:
        bugs.append("verify: " + json.dumps(v["problems"]))
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
