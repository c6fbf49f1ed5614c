"""p08_prefix_read_silently_drops_unreadable_profile: a read of several profiles by prefix, and ListFlights, silently leave out a profile whose objects cannot be read.

Severity: HIGH.
Setup: quiver on versitygw through a proxy; profiles p/q (3 rows), p/r
(1 row), s/t (1 row). Then requests for p/r's objects fail: the connection
is reset each time (a flaky path / overloaded partition of the store), or
they are refused 403 AccessDenied (a prefix-scoped policy).
What happens: DoGet {"prefix": "p"} answers OK with 3 rows (p/q's only)
and {"prefix": ""} OK with 4 of 5 rows -- p/r's rows silently missing from
a read that promises "every profile under the key prefix" in one snapshot;
GetFlightInfo plans it the same way (total_records 3); ListFlights (with and
without criteria) answers OK without p/r. Meanwhile `verify {}` correctly
fails UNAVAILABLE naming p/r, and sweep reports p/r skipped: the server knows
the profile exists but could not be read.
Expected: a profile that exists but cannot be read makes the listing / the
multi-profile read fail (UNAVAILABLE "the storage service did not answer" /
"refused the server's credentials or configuration"), never an OK answer
that silently omits its rows.
Usage: python p08_prefix_read_silently_drops_unreadable_profile.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
E403 = '<?xml version="1.0"?><Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>'

def scenario(name, act):
    global PROCS, DIRS
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    put(c, "p/r", pa.table({"v": [4]}))
    put(c, "s/t", pa.table({"v": [5]}))
    px.rule = lambda req: act if "/pfx/p/r/" in req.target else None    # p/r's objects cannot be read
    def chk(n, f, good):
        try:
            r = f()
            print(f"  [{name}] {n}: OK {r}")
            if r != good:
                bugs.append(f"[{name}] {n}: OK {r} (complete answer: {good})")
        except fl.FlightError as e:
            s = e2s(e)
            print(f"  [{name}] {n}: {s[:160]}")
            if "unavailable error" not in s:
                bugs.append(f"[{name}] {n}: {s[:120]}")
    chk("DoGet {prefix: p} rows", lambda: c.do_get(fl.Ticket(json.dumps({"prefix": "p"}).encode())).read_all().num_rows, 4)
    chk("DoGet {prefix: ''} rows", lambda: c.do_get(fl.Ticket(json.dumps({"prefix": ""}).encode())).read_all().num_rows, 5)
    chk("GetFlightInfo {prefix: p} total_records",
        lambda: c.get_flight_info(fl.FlightDescriptor.for_command(json.dumps({"prefix": "p"}))).total_records, 4)
    chk("ListFlights()", lambda: sorted("/".join(x.decode() for x in f.descriptor.path) for f in c.list_flights()), ["p/q", "p/r", "s/t"])
    chk("ListFlights(b'p')", lambda: sorted("/".join(x.decode() for x in f.descriptor.path) for f in c.list_flights(b"p")), ["p/q", "p/r"])
    try:
        action(c, "verify", {}); print(f"  [{name}] verify: OK")
    except fl.FlightError as e:
        print(f"  [{name}] verify (for comparison):", e2s(e)[:140])
    cleanup(); PROCS.clear(); DIRS.clear()
    return bugs

def main():
    bugs = scenario("p/r connections reset", "drop")
    bugs += scenario("p/r refused 403", ("status", 403, E403))
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
