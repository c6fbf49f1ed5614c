"""p07_storage_4xx_wrong_status: storage errors that are neither "absent" nor a refusal reach clients as INTERNAL, and compact answers INVALID_ARGUMENT.

Severity: LOW.
Setup: quiver on versitygw through a proxy; profile p/q committed. The
service answers the data-file requests with an S3 error that is neither a
missing object nor a credential refusal: 400 RequestTimeout (S3's transient
"your socket connection was not read from or written to within the timeout
period", which AWS SDKs class as retryable), 400 KMS.DisabledException /
KMS.KMSInvalidStateException (the bucket's SSE-KMS key disabled: a
configuration problem of the operator), 409 OperationAborted.
What happens: DoPut and DoGet answer INTERNAL "internal error (see server
log)" -- so clients that retry only UNAVAILABLE fail jobs a retry would
commit (the round-48 p01 complaint), and a disabled KMS key is not reported
as the storage configuration problem it is; the `compact` action answers
INVALID_ARGUMENT "the put's stream failed: ... RequestTimeout ..." --
telling the caller its request was malformed, when it was not.
Expected: a transient storage answer (RequestTimeout, OperationAborted)
-> UNAVAILABLE "retry"; a KMS key the service cannot use -> UNAVAILABLE
"the storage service refused the server's credentials or configuration";
and never INVALID_ARGUMENT for a storage-side failure of a well-formed
request (compact's internal put must not relabel storage errors as the
client's).
Usage: python p07_storage_4xx_wrong_status.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
def xml(c):
    return f'<?xml version="1.0"?><Error><Code>{c}</Code><Message>m</Message></Error>'

def main():
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    for code, cc in [(400, "RequestTimeout"), (400, "KMS.DisabledException"), (409, "OperationAborted")]:
        px.rule = lambda req: ("status", code, xml(cc)) if ".parquet" in req.target and req.method == "PUT" else None
        try:
            put(c, "p/q", pa.table({"v": [9]})); print(cc, "put OK?")
        except Exception as e:
            s = e2s(e); print(f"{code} {cc}: DoPut ->", s[:150])
            if "unavailable error" not in s: bugs.append(f"{cc}: DoPut {s[:90]}")
        px.rule = lambda req: ("status", code, xml(cc)) if ".parquet" in req.target and req.method == "GET" else None
        try:
            get(c, "p/q"); print(cc, "get OK?")
        except Exception as e:
            s = e2s(e); print(f"{code} {cc}: DoGet ->", s[:150])
            if "unavailable error" not in s: bugs.append(f"{cc}: DoGet {s[:90]}")
        try:
            action(c, "compact", {"path": "p/q"}); print(cc, "compact OK?")
        except Exception as e:
            s = e2s(e); print(f"{code} {cc}: compact ->", s[:200])
            if "unavailable error" not in s: bugs.append(f"{cc}: compact {s[:120]}")
        px.rule = lambda req: None
    rows = sorted(get(c, "p/q").column("v").to_pylist())
    print("healthy again: rows", rows, "verify", action(c, "verify", {})[0]["ok"])
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
