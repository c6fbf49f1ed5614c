"""p05_unclassified_storage_4xx_answers_internal: a 429 without the SlowDown code, a 412/409/400/416/501 from an intermediary, answer INTERNAL.

Severity: LOW.
Setup: quiver on versitygw through a proxy that answers the GET of
`p/q/manifest.json` (during a DoGet) with one storage error; then the HEAD
of `.log/...1.ndjson` during an append with 400 (a HEAD's answer has no body,
so no code: "BadRequest").
What happens: 429 TooManyRequests (a rate limiter's code, or none), 412,
409, 400, 416, 501 NotImplemented, 405, 410 and 307 are answered INTERNAL
"internal error (see server log)" -- while 429 SlowDown, 301 and 400
AuthorizationHeaderMalformed are UNAVAILABLE. A put whose HEAD got 400 answers INTERNAL too ("read commit log ...: stat ...:
BadRequest (HTTP 400); nothing was committed"). Clients that retry only
UNAVAILABLE fail a read (or, through a lost answer then a 412 on the retry
of a GET, a put) that a retry would serve. Round 49's p07 fixed only the
codes S3 itself uses (RequestTimeout, OperationAborted, KMS).
Expected: any answer from storage that is not the object is UNAVAILABLE
(transient, or refused: the server's configuration), never INTERNAL; a 429
of any code is throttling.
Usage: python p05_unclassified_storage_4xx_answers_internal.py QUIVER VERSITYGW   (exit 1 = bug present)
"""
import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import *  # noqa: E402,F401,F403 (the rounds' shared harness)

# ---- the reproducer ----
def main():
    bugs = []
    d, root, vp, port = setup()
    px = Proxy(port)
    qp, addr = start_quiver(px.port, "bkt", "pfx", d + "/q.log")
    c = client(addr)
    put(c, "p/q", pa.table({"v": [1, 2, 3]}))
    codes = [(429, "TooManyRequests"), (429, ""), (412, "PreconditionFailed"), (409, ""), (400, ""),
             (416, "InvalidRange"), (501, "NotImplemented"), (429, "SlowDown")]
    for code, name in codes:
        body = f'<?xml version="1.0"?><Error><Code>{name}</Code><Message>m</Message></Error>' if name else ""
        px.rule = lambda r, code=code, body=body: ("status", code, body) if r.method == "GET" and "manifest.json?" in r.target else None
        try:
            get(c, "p/q"); res = "OK"
        except Exception as e:
            res = e2s(e)[:170]
        print(code, name or "(no code)", "->", res)
        if "nternal" in res:
            bugs.append(f"{code} {name or '(no code)'} answered INTERNAL")
    # a HEAD (no body, so no code) answered 400, as during an append's check of the first log segment
    px.rule = lambda r: None
    put(c, "p/q", pa.table({"v": [4]}))
    px.rule = lambda r: ("status", 400, "") if r.method == "HEAD" and re.search(r"/\.log/0+1\.ndjson$", r.target) else None
    try:
        put(c, "p/q", pa.table({"v": [5]})); res = "OK"
    except Exception as e:
        res = e2s(e)[:170]
    print("HEAD 400 during a put ->", res)
    if "nternal" in res:
        bugs.append("HEAD answered 400 during a put: INTERNAL")
    px.rule = lambda r: None
    print("BUGS:" if bugs else "ok", *bugs, sep="\n  ")
    return 1 if bugs else 0

if __name__ == "__main__":
    rc = 1
    try: rc = main()
    finally: cleanup()
    sys.exit(rc)
