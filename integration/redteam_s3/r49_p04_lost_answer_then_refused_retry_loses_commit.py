"""p04_lost_answer_then_refused_retry_loses_commit: a refused retry of a commit whose first attempt landed removes committed files.

Severity: HIGH.
Setup: quiver on versitygw through a proxy. A put's commit point, the
conditional create of `.log/<seq>.ndjson`, reaches the service and lands, but
its answer is lost (connection reset). The SDK retries the create; the retry
is answered with a refusal: 403 AccessDenied (a policy / quota that now
denies PutObject while DeleteObject still works), 400 ExpiredToken (a
short-lived STS session expiring between the attempts) or 404 NoSuchBucket
(from a misrouted proxy).
What happens: the server takes the retry's refusal as the create's outcome
("nothing written"): the put is answered UNAVAILABLE "... refused the
server's credentials or configuration ...: retry later (a put with the
same request_id commits at most once)" -- or, for a retry answered with a
non-refusal 4xx such as S3's transient 400 RequestTimeout (also
IncompleteBody, BadDigest, InvalidArgument, 409 OperationAborted), INTERNAL
"internal error" -- and the put's data file
(v0/1.parquet) is deleted -- but the segment from the first attempt is
there. From then on every read of the profile fails DATA_LOSS "committed
file v0/1.parquet is missing", `verify` reports it missing, and the
client's retry with the same request_id is ACKNOWLEDGED (replayed from the
landed record) while its rows are gone.
The same through the `compact` action: its new version's segment lands, the
files and .version.json of the new version are deleted, and every read of
the profile's latest version fails DATA_LOSS "p/q v2: its .version.json ...
is missing" -- the whole profile becomes unreadable.
Expected: once any attempt of the create went unanswered, a later attempt's
error (refusal or otherwise) says nothing about the earlier one: the server
must read the segment back, or answer "whether it committed is unknown" and
keep the files, exactly as it does when every attempt is unanswered.
Usage: python p04_lost_answer_then_refused_retry_loses_commit.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
SEG = re.compile(r"/\.log/\d+\.ndjson")
E403 = '<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'
E400 = '<?xml version="1.0"?><Error><Code>ExpiredToken</Code><Message>The provided token has expired.</Message></Error>'

def scenario(name, refusal):
    global PROCS, DIRS
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    st = {"on": True, "n": 0}
    def rule(req):
        if st["on"] and SEG.search(req.target) and req.method == "PUT":
            st["n"] += 1
            return "lost" if st["n"] == 1 else refusal     # 1st attempt lands, answer lost; retries refused
        return None
    px.rule = rule
    try:
        r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
        print(f"[{name}] first put acknowledged seq", r["seq"])
    except fl.FlightError as e:
        print(f"[{name}] first put:", e2s(e)[:250])
    st["on"] = False
    try:
        r = put(c, "p/q", pa.table({"v": [4]}), request_id="a2")   # the careful client's retry
        print(f"[{name}] retry acknowledged: seq", r["seq"], [f["path"] for f in r["files"]])
    except fl.FlightError as e:
        print(f"[{name}] retry:", e2s(e)[:200])
    try:
        rows = sorted(get(c, "p/q").column("v").to_pylist())
        print(f"[{name}] rows", rows)
        if rows != [1, 2, 3, 4]:
            bugs.append(f"[{name}] rows {rows}")
    except fl.FlightError as e:
        bugs.append(f"[{name}] read: " + e2s(e)[:200])
    v = action(c, "verify", {})[0]
    if not v["ok"]:
        bugs.append(f"[{name}] verify: " + json.dumps(v["problems"]))
    cleanup(); PROCS.clear(); DIRS.clear()
    return bugs

def scenario_compact():
    # the same through the compact action: its new version's commit lands, its answer is lost, the retry is refused
    global PROCS, DIRS
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    put(c, "p/q", pa.table({"v": [4]}))
    st = {"n": 0}
    def rule(req):
        if SEG.search(req.target) and req.method == "PUT":
            st["n"] += 1
            return "lost" if st["n"] == 1 else ("status", 403, E403)
        return None
    px.rule = rule
    try:
        print("[compact] ->", action(c, "compact", {"path": "p/q"}))
    except fl.FlightError as e:
        print("[compact] ->", e2s(e)[:200])
    px.rule = lambda req: None
    try:
        rows = sorted(get(c, "p/q").column("v").to_pylist())
        print("[compact] rows", rows)
        if rows != [1, 2, 3, 4]:
            bugs.append(f"[compact] rows {rows}")
    except fl.FlightError as e:
        bugs.append("[compact] read of the latest version: " + e2s(e)[:220])
    cleanup(); PROCS.clear(); DIRS.clear()
    return bugs

def main():
    bugs = scenario("retry 403 AccessDenied", ("status", 403, E403))
    bugs += scenario("retry 400 ExpiredToken", ("status", 400, E400))
    bugs += scenario("retry 400 RequestTimeout", ("status", 400, '<?xml version="1.0"?><Error><Code>RequestTimeout</Code><Message>Your socket connection to the server was not read from or written to within the timeout period.</Message></Error>'))
    bugs += scenario_compact()
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
