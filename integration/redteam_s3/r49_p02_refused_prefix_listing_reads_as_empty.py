"""p02_refused_prefix_listing_reads_as_empty: with the S3 service refusing the server, a listing by key prefix answers "nothing there".

Severity: MEDIUM.
Setup: quiver on versitygw, profiles p/q and p/r committed. Then the service
refuses the server's credentials/configuration: the access key rotated
(versitygw 404 XAdminUserNotFound), a wrong secret (403
SignatureDoesNotMatch), the bucket gone (404 NoSuchBucket); the same with
403 AccessDenied, 401, 400 InvalidAccessKeyId / ExpiredToken, 301 from a
proxy; and the same when the service is simply unreachable (killed).
What happens: ListFlights with no criteria correctly answers UNAVAILABLE
"the storage service refused the server's credentials or configuration",
but ListFlights with a key-prefix criteria (b"p") answers OK with an EMPTY
list, and a read of several profiles by prefix (DoGet / GetFlightInfo
{"prefix": "p"}) answers NOT_FOUND "profile not found: no profile under the
prefix "p"" -- a refused store is reported as holding no profiles under p.
A dashboard or a job enumerating its profiles by prefix silently sees none.
Expected: UNAVAILABLE ("... refused the server's credentials or
configuration") for every RPC that touches storage, never an empty listing
or NOT_FOUND (docs/operations.md "Running on S3").
Usage: python p02_refused_prefix_listing_reads_as_empty.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
B, P = "qbucket49", "qprefix49"

def probe(c, label, bugs):
    def chk(name, f):
        try:
            r = f()
            print(f"  [{label}] {name}: OK {r}")
            bugs.append(f"[{label}] {name}: answered OK {r} while storage refuses the server")
        except Exception as e:
            s = e2s(e)
            print(f"  [{label}] {name}: {s[:200]}")
            if "unavailable error" not in s:
                bugs.append(f"[{label}] {name}: {s[:160]}")
    chk("ListFlights(b'')", lambda: [f.descriptor.path for f in c.list_flights(b"")])
    chk("ListFlights(b'p')", lambda: [f.descriptor.path for f in c.list_flights(b"p")])
    chk("DoGet {prefix: p}", lambda: c.do_get(fl.Ticket(json.dumps({"prefix": "p"}).encode())).read_all().num_rows)
    chk("GetFlightInfo {prefix: p}", lambda: c.get_flight_info(fl.FlightDescriptor.for_command(json.dumps({"prefix": "p"}))).total_records)

def main():
    global AK, SK
    bugs = []
    d, root, vp, port = setup(bucket=B)
    qp, addr = start_quiver(port, B, P, d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    put(c, "p/r", pa.table({"v": [4]}))
    print("healthy: ListFlights(b'p') =", [f.descriptor.path for f in c.list_flights(b"p")])
    # 1. the access key is rotated: versitygw no longer knows the server's key
    vp.kill(); vp.wait()
    vp2, _ = start_vgw(root, port, ak="rotatedkey49", sk="rotatedsecret49")
    probe(c, "rotated key", bugs)
    vp2.kill(); vp2.wait()
    # 2. the bucket is gone
    vp3, _ = start_vgw(root, port)
    os.rename(os.path.join(root, B), os.path.join(d, "moved"))
    probe(c, "bucket gone", bugs)
    os.rename(os.path.join(d, "moved"), os.path.join(root, B))
    # 3. the service is unreachable (plain outage)
    vp3.kill(); vp3.wait()
    probe(c, "service down", bugs)
    start_vgw(root, port)
    rows = sorted(get(c, "p/q").column("v").to_pylist())
    print("restored: p/q rows", rows)
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
