"""The outside red team's attacks (2026-11-30), kept as tests: each script
starts its own server on a temp data dir and exits non-zero while its bug
is present. redteam_read/ plants or puts crafted Parquet files (rounds 5
and 6); redteam_write/ puts, compacts, sweeps and verifies (rounds 7 and
8; round 10's dictionary scripts are d*.py, rounds 12 and 13's command-line
client scripts c*.py and e*.py, f*.py the CSV round trip after them, round
14's shared append files g*.py, round 15's h*.py, round 16's i*.py, round
17's j*.py and its follow-up k*.py, round 18's s*.py, round 19's t*.py, round 20's u*.py, round 21's v*.py, round 22's w*.py, round 24's y*.py, round 25's z*.py, round 26's a*.py). See
docs/reliability.md, "Bugs found"."""

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SCRIPTS = [f"{d}/{p.name}" for d in ("redteam_read", "redteam_write") for p in sorted((HERE / d).glob("[abdcefghijklmnopqrstuvwxyz][0-9]*.py"))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("script", SCRIPTS)
def test_redteam(script, quiver_bin):
    env = dict(os.environ, QUIVER=str(quiver_bin), PORT=str(free_port()))
    r = subprocess.run([sys.executable, str(HERE / script)], env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"{script} exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
