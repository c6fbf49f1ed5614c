"""The outside red team's attacks (2026-11-30), kept as tests: each script
starts its own server on a temp data dir and exits non-zero while its bug
is present. redteam_read/ plants or puts crafted Parquet files (rounds 5
and 6); redteam_write/ puts, compacts, sweeps and verifies (rounds 7 and
8; round 10's dictionary scripts are d*.py, rounds 12 and 13's command-line
client scripts c*.py and e*.py, f*.py the CSV round trip after them, round
14's shared append files g*.py, round 15's h*.py, round 16's i*.py, round
17's j*.py and its follow-up k*.py, round 18's s*.py, round 19's t*.py, round 20's u*.py, round 21's v*.py, round 22's w*.py, round 24's y*.py, round 25's z*.py, round 26's a*.py, rounds 51 and 52's p51_*.py and p52_*.py). redteam_s3/ holds the attacks on Quiver over S3
(rounds 48 and on: r48_*.py, r49_*.py, r50_*.py), which start versitygw themselves. See
docs/reliability.md, "Bugs found"."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import versitygw_binary

HERE = Path(__file__).parent
SCRIPTS = [f"{d}/{p.name}" for d in ("redteam_read", "redteam_write") for p in sorted((HERE / d).glob("[abdcefghijklmnopqrstuvwxyz][0-9]*.py"))]
# Attacks on Quiver over S3 (rounds 48 to 50): each starts its own
# versitygw ($VERSITYGW) and servers (round 49's behind a misbehaving HTTP
# proxy of their own), and may kill and restart them.
S3_SCRIPTS = [f"redteam_s3/{p.name}" for p in sorted((HERE / "redteam_s3").glob("r[0-9]*.py"))]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("script", SCRIPTS)
def test_redteam(script, quiver_bin, tmp_path):
    run_script(script, dict(os.environ, QUIVER=str(quiver_bin), PORT=str(free_port())), tmp_path)


@pytest.mark.parametrize("script", S3_SCRIPTS)
def test_redteam_s3(script, quiver_bin, tmp_path):
    try:
        vgw = versitygw_binary()
    except Exception as e:  # noqa: BLE001 - any reason it cannot be had
        if os.environ.get("CI"):
            pytest.fail(f"versitygw unavailable in CI: {e}")
        pytest.skip(f"versitygw unavailable (CI=true makes this a failure): {e}")
    run_script(script, dict(os.environ, QUIVER=str(quiver_bin), VERSITYGW=str(vgw), TMPDIR=str(tmp_path)), tmp_path)


def run_script(script, env, tmp_path):
    """Run a red-team script in a process group of its own; it must exit 0."""
    out, err = tmp_path / "stdout", tmp_path / "stderr"
    with open(out, "w") as o, open(err, "w") as e:
        # In a process group of its own, killed whole when the script
        # ends: a script that fails before it stops its server (an
        # exception on the way) left the server running.
        p = subprocess.Popen([sys.executable, str(HERE / script)], env=env, stdout=o, stderr=e, text=True,
                             start_new_session=True)
        try:
            # Waited for without reaping it (WNOWAIT): until it is reaped
            # its pid, the group's id, cannot be another's.
            deadline = time.monotonic() + 600
            while os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                if time.monotonic() > deadline:
                    pytest.fail(f"{script} ran for more than 600 s")
                time.sleep(0.05)
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            rc = p.wait()
    assert rc == 0, f"{script} exit {rc}\n{out.read_text()[-3000:]}\n{err.read_text()[-3000:]}"
