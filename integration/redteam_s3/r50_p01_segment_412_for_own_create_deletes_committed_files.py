"""p01_segment_412_for_own_create_deletes_committed_files: a log-segment create that landed but was answered 412 (or 403) deletes the commit's files.

Severity: HIGH.
Setup: quiver on versitygw through a proxy. A put's commit point, the
conditional create (If-None-Match: *) of `.log/<seq>.ndjson`, reaches the
service and lands, but the answer the server gets is 412 PreconditionFailed
(as from an intermediary -- a load balancer or gateway that retried the
request upstream after a timeout, so its second try met the object its first
try made) or 403.
What happens: the server takes the 412 as "another writer took this seq" and
the 403 as "nothing written", and removes the put's data files (and for a
write or compaction the new version's .version.json) -- but the segment is
there with this server's own write id and bytes. The put is even
ACKNOWLEDGED (412 case: the cycle finds its own request_id in the log and
answers the commit record) or the client's retry with the same request_id is
replayed from it; every later read fails DATA_LOSS "committed file
v0/1.parquet is missing" (or "its .version.json ... is missing": the whole
latest version unreadable), and sweep + verify cannot mend it.
Expected: a create refused with 412 proves only that the key exists; s3fs
already HEADs for the write id after an unanswered attempt and should do the
same (or the store should compare the segment's bytes, which it reads anyway)
before treating the seq as another writer's; and the cycle must never remove
files that a record in the log (here: its own) lists. 403 on a landed
create: at least "unknown", files kept.
Usage: python p01_segment_412_for_own_create_deletes_committed_files.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
SEG = re.compile(r"/\.log/\d+\.ndjson")
E412 = '<?xml version="1.0"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>'
E403 = '<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'

def scenario(name, mode, answer):
    global PROCS, DIRS
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    st = {"n": 0}
    def rule(req):
        # the segment create is forwarded and lands; its answer is replaced by `answer`
        if SEG.search(req.target) and req.method == "PUT":
            st["n"] += 1
            return ("fwd_status",) + answer if st["n"] == 1 else None
        return None
    px.rule = rule
    exp = [1, 2, 3, 4] if mode == "append" else [4]
    try:
        if mode == "compact":
            exp = [1, 2, 3]
            print(f"[{name}] compact ->", action(c, "compact", {"path": "p/q"})[0]["seq"])
        else:
            r = put(c, "p/q", pa.table({"v": [4]}), mode=mode, request_id="a2")
            print(f"[{name}] put acknowledged: seq", r["seq"])
    except fl.FlightError as e:
        print(f"[{name}] first attempt:", e2s(e)[:200])
    px.rule = lambda req: None
    if mode != "compact":
        try:
            r = put(c, "p/q", pa.table({"v": [4]}), mode=mode, request_id="a2")   # the client's retry
            print(f"[{name}] retry acknowledged: seq", r["seq"])
        except fl.FlightError as e:
            print(f"[{name}] retry:", e2s(e)[:200])
    try:
        rows = sorted(get(c, "p/q").column("v").to_pylist())
        print(f"[{name}] rows", rows)
        if rows != exp:
            bugs.append(f"[{name}] rows {rows}, expected {exp}")
    except fl.FlightError as e:
        bugs.append(f"[{name}] read: " + e2s(e)[:220])
    try:
        action(c, "sweep", {"older_than_s": 0})
        v = action(c, "verify", {})[0]
        if not v["ok"]:
            bugs.append(f"[{name}] verify after sweep: " + json.dumps(v["problems"])[:300])
    except fl.FlightError as e:
        bugs.append(f"[{name}] sweep/verify: " + e2s(e)[:200])
    cleanup(); PROCS.clear(); DIRS.clear()
    return bugs

def main():
    bugs = []
    bugs += scenario("append, landed create answered 412", "append", (412, E412))
    bugs += scenario("write, landed create answered 412", "write", (412, E412))
    bugs += scenario("compact, landed create answered 412", "compact", (412, E412))
    bugs += scenario("append, landed create answered 403", "append", (403, E403))
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
