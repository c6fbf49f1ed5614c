"""p06_committed_new_profile_missing_from_listing_and_prefix_read: a new profile whose first commit landed but whose manifest.json create failed is left out of ListFlights and prefix reads, which answer OK.

Severity: MEDIUM.
Setup: quiver on versitygw through a proxy; profile p/a exists. The first put
to a new profile p/n commits (its log segment .log/...1.ndjson is created),
then every attempt to create p/n/manifest.json fails (connection reset before
the request is forwarded; the same with 503).
What happens: the put is answered UNAVAILABLE "commit unavailable: p/n v0 is
committed but not yet the latest version: move manifest ...". The data is
committed: DoGet {"path": "p/n"} returns its 2 rows. But ListFlights (all,
and with criteria "p") answers OK without p/n, and DoGet/GetFlightInfo
{"prefix": "p"} answer OK with p/a's rows only -- a partial answer presented
as whole, the thing round 49's p08 fixed for unreadable profiles. It stays so
(reads by path do not settle the manifest) until another put to p/n or a
sweep writes the manifest from the log. A client that believed the message
("is committed") and did not retry leaves the profile invisible to every
listing and prefix read.
Expected: a profile with committed records is listed and read by prefix
(its manifest settled from the log, as a read by path evidently can), or the
listing / prefix read fails UNAVAILABLE -- never OK without it.
Usage: python p06_committed_new_profile_missing_from_listing_and_prefix_read.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
def names(c, crit=b""):
    return sorted("/".join(x.decode() for x in fi.descriptor.path) for fi in c.list_flights(crit))

def main():
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/a", pa.table({"v": [1]}))
    px.rule = lambda r: "drop" if r.method == "PUT" and r.target.startswith("/bkt/pfx/p/n/manifest.json?") else None
    try:
        r = put(c, "p/n", pa.table({"v": [7, 8]}), request_id="x")
        print("put acknowledged:", r["seq"])
    except fl.FlightError as e:
        print("put:", e2s(e)[:250])
    px.rule = lambda r: None
    for rnd in range(2):
        try:
            n = get(c, "p/n").num_rows
            print("DoGet path p/n rows:", n)
        except fl.FlightError as e:
            print("DoGet path p/n:", e2s(e)[:150]); n = None
        if n != 2:
            continue
        try:
            l1, l2 = names(c), names(c, b"p")
            print("ListFlights:", l1, "criteria p:", l2)
            if "p/n" not in l1 or "p/n" not in l2:
                bugs.append(f"round {rnd}: ListFlights answered OK without the committed profile p/n: {l1}")
        except fl.FlightError as e:
            print("ListFlights:", e2s(e)[:150])
        try:
            rows = sorted(c.do_get(fl.Ticket(json.dumps({"prefix": "p"}).encode())).read_all().column("v").to_pylist())
            print("DoGet prefix p rows:", rows)
            if rows != [1, 7, 8]:
                bugs.append(f"round {rnd}: DoGet prefix answered OK with {rows}, expected [1, 7, 8]")
        except fl.FlightError as e:
            print("DoGet prefix:", e2s(e)[:150])
        try:
            info = c.get_flight_info(fl.FlightDescriptor.for_command(json.dumps({"prefix": "p"})))
            print("GetFlightInfo prefix total_records:", info.total_records)
            if info.total_records != 3:
                bugs.append(f"round {rnd}: GetFlightInfo prefix total_records {info.total_records}, expected 3")
        except fl.FlightError as e:
            print("GetFlightInfo prefix:", e2s(e)[:150])
        time.sleep(3)
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
