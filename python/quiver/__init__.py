"""Quiver from Python: read and write versioned tables on a Quiver server.

>>> import quiver
>>> q = quiver.connect("localhost:8815")
>>> q.write("sales/orders", {"id": [1, 2], "region": ["eu", "us"]}, partition_by=["region"])
>>> q.read("sales/orders", columns=["id"])

Everything goes over Arrow Flight with pyarrow; polars and pandas are
optional (read_polars, read_pandas, QuiverDal). Errors are the pyarrow
exceptions of the server's status codes, with Quiver's messages. See
docs/python.md in the Quiver repository.
"""

from __future__ import annotations

from ._client import Client, ProfileInfo, connect, new_request_id
from ._errors import NotFoundError
from ._types import (
    BreakLockResult,
    FileRecord,
    Problem,
    PutResult,
    RemoveOldVersionsResult,
    SweepResult,
    VerifyResult,
    VersionList,
    VersionSummary,
)
from .dal import QuiverDal

__version__ = "0.1.0"

__all__ = [
    "BreakLockResult",
    "Client",
    "FileRecord",
    "NotFoundError",
    "Problem",
    "ProfileInfo",
    "PutResult",
    "QuiverDal",
    "RemoveOldVersionsResult",
    "SweepResult",
    "VerifyResult",
    "VersionList",
    "VersionSummary",
    "connect",
    "new_request_id",
]
