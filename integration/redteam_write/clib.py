"""Shared helpers for the command-line red-team reproducers (c01_*.py … c10_*.py,
round 12): a Server running `quiver serve` on a temp dir, the CLI run against
it (elib.py's), and an IPC stream writer. The binary is env QUIVER, else <repo>/bin/quiver.
"""
import os, sys, subprocess, tempfile, shutil, time, json, signal
import pyarrow as pa, pyarrow.flight as fl, pyarrow.parquet as pq, pyarrow.ipc as ipc
from elib import Server, QUIVER  # noqa: F401 (the server of rounds 12 and 13)

def write_stream(path, batches, schema, **opts):
    with ipc.new_stream(path, schema, options=ipc.IpcWriteOptions(**opts)) as w:
        for b in batches: w.write_batch(b)
