"""p03_codeless_404_listing_reads_as_empty: an endpoint answering 404 without an S3 error code makes the store look empty and verify ok.

Severity: MEDIUM.
Setup: quiver on versitygw through a proxy (an ingress / load balancer in
front of the object store). Profiles p/q (4 rows) committed. Then the route
breaks: every request, bucket listings included, is answered HTTP 404 with
no S3 error code (empty body, or a "404 page not found" text body, as a
misrouted ingress, a wrong --s3-endpoint path or a stopped virtual host
answers).
What happens: DoGet / GetFlightInfo / GetSchema / list-versions / lineage /
compact of the committed profile answer NOT_FOUND "profile not found: p/q";
ListFlights answers an empty list; `verify {}` answers {"ok": true,
"checked_files": 0, "problems": []}; sweep answers OK. (Puts are refused
UNAVAILABLE and nothing is written.) When only the GETs of data files get
such a 404, DoGet answers DATA_LOSS "committed file v0/0.parquet is missing"
and `verify` reports the intact files "missing" -- a false report of damage,
which the docs tell operators to act on. An auditor is told the store is fine
while nothing could be read -- the same outcome as round 48's p02, through
another door. The offline CLI on the same endpoint does refuse ("data dir
... does not exist (nothing under that prefix)", exit 1).
Expected: a 404 without a code may mean "no such object" for a HEAD (whose
answer has no body); S3 answers a GET of a missing key with NoSuchKey, so a
codeless 404 on a GET is not S3's "absent" but an intermediary's. And a *bucket listing* (ListObjectsV2 / ListMultipartUploads) is
never answered 404 for an existing bucket: a 404 listing (with no code, or
any code but a recognised one) is a refusal of the server's configuration
-> UNAVAILABLE, and verify must fail rather than report ok over 0 files.
Usage: python p03_codeless_404_listing_reads_as_empty.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
B, P = "qbucket49", "qprefix49"

def main():
    bugs = []
    d, root, vp, port = setup(bucket=B)
    px = Proxy(port)
    qp, addr = start_quiver(px.port, B, P, d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    put(c, "p/q", pa.table({"v": [4]}))
    px.rule = lambda req: ("status", 404, "")       # the route to the object store is gone
    def chk(name, f):
        try:
            r = f()
            print(f"  {name}: OK {str(r)[:150]}")
            bugs.append(f"{name}: OK {str(r)[:150]}")
        except Exception as e:
            s = e2s(e)
            print(f"  {name}: {s[:200]}")
            if "unavailable error" not in s:
                bugs.append(f"{name}: {s[:150]}")
    chk("DoGet p/q", lambda: get(c, "p/q").num_rows)
    chk("GetFlightInfo p/q", lambda: c.get_flight_info(fl.FlightDescriptor.for_path("p/q")).total_records)
    chk("ListFlights", lambda: [f.descriptor.path for f in c.list_flights()])
    chk("verify {}", lambda: action(c, "verify", {}))
    chk("list-versions p/q", lambda: action(c, "list-versions", {"path": "p/q"}))
    # phase 2: only GETs of data files get the codeless 404 (S3 itself answers a missing key's GET with NoSuchKey)
    px.rule = lambda req: ("status", 404, "") if req.method == "GET" and ".parquet" in req.target else None
    chk("DoGet p/q (data-file GETs 404 without code)", lambda: get(c, "p/q").num_rows)
    chk("verify {} (data-file GETs 404 without code)", lambda: action(c, "verify", {}))
    px.rule = lambda req: None
    rows = sorted(get(c, "p/q").column("v").to_pylist())
    print("route restored: p/q rows", rows)
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
