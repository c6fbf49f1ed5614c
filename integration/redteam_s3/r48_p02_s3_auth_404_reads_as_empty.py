"""p02_s3_auth_404_reads_as_empty: an S3 auth rejection answered with HTTP 404 is taken for "no such object".

Severity: MEDIUM.
What happens: the server's credentials stop being accepted (key rotated /
user removed; versitygw, the verified service, answers an unknown access
key with HTTP 404 XAdminUserNotFound). Quiver then answers DoGet,
GetFlightInfo and list-versions of a committed profile NOT_FOUND "profile
not found", ListFlights an empty list, and `verify {}` {"ok": true,
"checked_files": 0, "problems": []} -- an auditor is told the store is
fine while nothing could be read. (With a wrong secret, HTTP 403, it answers
INTERNAL instead.)
Expected: only a NoSuchKey / NoSuchBucket (NoSuchUpload) error code means
"absent"; any other error (auth, AccessDenied, XAdminUserNotFound, ...) fails
the RPC (PERMISSION_DENIED / UNAVAILABLE / INTERNAL), and verify never
reports ok:true over objects it could not read.
Usage: python p02_s3_auth_404_reads_as_empty.py QUIVER VERSITYGW  (exit 1 = bug present)
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
    start_vgw(root, port, ak="rotatedkey", sk="rotatedsecret")  # the gateway no longer knows the server's key
    bugs = []
    try:
        get(c, "p/q"); bugs.append("DoGet OK?")
    except fl.FlightError as e:
        if "not found" in str(e): bugs.append("DoGet: NOT_FOUND for a committed profile")
    except KeyError as e:
        bugs.append("DoGet: NOT_FOUND for a committed profile")
    try:
        lst = list(c.list_flights())
        if not lst: bugs.append("ListFlights: empty list instead of an error")
    except Exception: pass
    try:
        v = action(c, "verify", {})[0]
        if v.get("ok"): bugs.append(f"verify ok:true, checked_files={v.get('checked_files')}")
    except Exception: pass
    print(bugs)
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
