"""p03_write_datafile_landed_but_refused_leaves_mutated_version: a write whose data file landed but was answered 412/403 leaves a version verify calls "mutated" forever.

Severity: MEDIUM.
Setup: quiver on versitygw through a proxy. A `mode: "write"` put (or a
`compact`) creates v1/, v1/.version.json, then PUTs v1/0.parquet; that PUT
reaches the service and lands, but the answer is 412 PreconditionFailed or
403 AccessDenied (an intermediary's answer after forwarding).
What happens: the put fails (412: INTERNAL "internal error (see server
log)"; 403: UNAVAILABLE refused) and the failed write removes
v1/.version.json but not v1/0.parquet (it believes the file was never
written). The version now holds a data file Quiver wrote with neither its
.version.json nor a commit record: `verify` reports it `mutated` ("committed
data lost or altered ... (removed: restore them)"), `sweep` skips it ("left
alone"), so verify stays failing after sweep until an operator deletes it by
hand. (Round 48 fixed the same shape for an *unanswered* data-file commit.)
Expected: an answered refusal of a data-file PUT is no proof it was not
written: the failed write should check for (and remove, or keep its
.version.json so sweep removes it as an abandoned write) any file it tried to
write; a 412 should not surface as INTERNAL.
Usage: python p03_write_datafile_landed_but_refused_leaves_mutated_version.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
DATA = re.compile(r"/v1/\d+\.parquet\?")
E412 = '<?xml version="1.0"?><Error><Code>PreconditionFailed</Code><Message>At least one of the pre-conditions you specified did not hold</Message></Error>'
E403 = '<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'

def scenario(name, op, answer):
    global PROCS, DIRS
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}), request_id="a1")
    put(c, "p/q", pa.table({"v": [4]}), request_id="a2")
    st = {"n": 0}
    def rule(req):
        if DATA.search(req.target) and req.method == "PUT":
            st["n"] += 1
            return ("fwd_status",) + answer if st["n"] == 1 else None
        return None
    px.rule = rule
    try:
        if op == "write":
            r = put(c, "p/q", pa.table({"v": [9]}), mode="write", request_id="w1")
            print(f"[{name}] put acknowledged: seq", r["seq"])
        else:
            print(f"[{name}] compact ->", action(c, "compact", {"path": "p/q"}))
    except fl.FlightError as e:
        s = e2s(e)
        print(f"[{name}] first attempt:", s[:200])
        if "nternal" in s:
            bugs.append(f"[{name}] answered INTERNAL: " + s[:120])
    px.rule = lambda req: None
    try:
        s = action(c, "sweep", {"older_than_s": 0})[0]
        print(f"[{name}] sweep skipped:", json.dumps(s.get("skipped"))[:300])
        v = action(c, "verify", {})[0]
        if not v["ok"]:
            bugs.append(f"[{name}] verify after sweep: " + json.dumps(v["problems"])[:300])
    except fl.FlightError as e:
        bugs.append(f"[{name}] sweep/verify: " + e2s(e)[:200])
    try:
        rows = sorted(get(c, "p/q").column("v").to_pylist())
        if rows != [1, 2, 3, 4]:
            bugs.append(f"[{name}] rows {rows}")
    except fl.FlightError as e:
        bugs.append(f"[{name}] read: " + e2s(e)[:200])
    cleanup(); PROCS.clear(); DIRS.clear()
    return bugs

def main():
    bugs = scenario("write, data file landed, answered 412", "write", (412, E412))
    bugs += scenario("write, data file landed, answered 403", "write", (403, E403))
    bugs += scenario("compact, data file landed, answered 403", "compact", (403, E403))
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
