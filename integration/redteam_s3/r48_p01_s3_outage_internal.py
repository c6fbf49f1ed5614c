"""p01_s3_outage_internal: the object store unreachable -> every RPC answers INTERNAL.

Severity: MEDIUM.
What happens: with the S3 service down (connection refused) or restarting,
DoPut, DoGet, GetFlightInfo, ListFlights and the actions all answer
INTERNAL "internal error (see server log)" (server log: "s3fs: read ...:
request failed: dial: connection refused; nothing was committed").
Clients (the Python client and the Go client) retry only UNAVAILABLE, so a
transient S3 blip fails acknowledged-looking jobs outright instead of being
retried with the same request_id; and INTERNAL claims a server fault.
Expected: a storage-transport failure (connection refused/reset, timeout, 5xx)
is UNAVAILABLE (for a put: "nothing was committed: retry", or "outcome
unknown: retry with the same request_id"), as the local-disk paths already
answer (a removed spill dir answers UNAVAILABLE).
Usage: python p01_s3_outage_internal.py QUIVER VERSITYGW  (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

def main():
    d, root, vp, port = setup()
    qp, addr = start_quiver(port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    vp.kill(); vp.wait()
    codes = {}
    for name, f in [("DoPut", lambda: put(c, "p/q", pa.table({"v": [4]}), request_id="r1")),
                    ("DoGet", lambda: get(c, "p/q")),
                    ("GetFlightInfo", lambda: c.get_flight_info(fl.FlightDescriptor.for_path("p/q"))),
                    ("ListFlights", lambda: list(c.list_flights()))]:
        try:
            f(); codes[name] = "OK"
        except fl.FlightUnavailableError: codes[name] = "UNAVAILABLE"
        except fl.FlightInternalError as e: codes[name] = "INTERNAL" if "internal error" in str(e) else type(e).__name__
        except Exception as e: codes[name] = type(e).__name__
    print(codes)
    vp2, _ = start_vgw(root, port)
    # after recovery the retried put commits once
    put(c, "p/q", pa.table({"v": [4]}), request_id="r1")
    n = get(c, "p/q").num_rows
    print("rows after recovery", n)
    bad = [k for k, v in codes.items() if v == "INTERNAL"]
    return 1 if bad or n != 4 else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
