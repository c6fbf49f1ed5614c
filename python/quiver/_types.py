"""The JSON objects Quiver answers (docs/protocol.md), as typed dicts.

They are plain dicts at run time. The server only ever adds fields to them
(none is removed, renamed or retyped), so code should read the keys it
knows and ignore the rest; every key is optional here for that reason.
"""

from __future__ import annotations

from typing import Any, TypedDict

__all__ = [
    "BreakLockResult",
    "ChainHead",
    "FileRecord",
    "KeptVersion",
    "Problem",
    "PutResult",
    "RemoveOldVersionsResult",
    "SweepResult",
    "VerifyResult",
    "VersionList",
    "VersionSummary",
]


class FileRecord(TypedDict, total=False):
    """One data file of a commit; path is relative to the profile
    directory ("v1/region=eu/0.parquet")."""

    path: str
    rows: int
    bytes: int
    sha256: str
    partition: dict[str, str]


class PutResult(TypedDict, total=False):
    """A commit record: what a write, append or compact answers (for a put
    replayed by its request id, the first put's record), and one entry of
    lineage."""

    seq: int
    prev: str
    path: str
    keys: list[str]
    version: str
    index: int
    mode: str
    format: str
    rows: int
    schema_version: str
    files: list[FileRecord]
    committed: str
    writer: str
    request_id: str
    metadata: dict[str, Any]
    signer: str
    sig: str


class VersionSummary(TypedDict, total=False):
    """One version of a profile (list-versions)."""

    version: str
    files: int
    rows: int
    bytes: int
    created: str
    format: str
    schema_version: str
    partition_by: list[str]
    commits: int
    last_commit: str


class VersionList(TypedDict, total=False):
    """Every version of a profile, oldest first, and the latest one."""

    path: str
    latest: str
    versions: list[VersionSummary]


class Problem(TypedDict, total=False):
    """One finding of verify; kind is "mutated", "missing", "orphan",
    "unrecorded", "stale_temp", "stale_lock", "chain_broken",
    "bad_signature", "link" or "unknown"; path is relative to the data
    directory."""

    kind: str
    path: str
    detail: str


class ChainHead(TypedDict, total=False):
    """The last record of a profile's commit log (publish it elsewhere to
    detect a truncated history later)."""

    path: str
    seq: int
    hash: str


class VerifyResult(TypedDict, total=False):
    """The result of verify: ok is False when any problem was found."""

    ok: bool
    checked_files: int
    problems: list[Problem]
    heads: list[ChainHead]


class KeptVersion(TypedDict, total=False):
    """An old version remove_old_versions left in place, and why."""

    version: str
    reason: str


class RemoveOldVersionsResult(TypedDict, total=False):
    """The versions removed (oldest first) and those kept beyond keep."""

    removed: list[str]
    kept: list[KeptVersion]


class SweepResult(TypedDict, total=False):
    """What sweep removed (paths relative to the data directory), what
    it found but would not remove, and the profiles whose missing manifest
    it wrote from their commit log."""

    removed: list[str]
    skipped: list[Problem]
    settled: list[str]


class BreakLockResult(TypedDict, total=False):
    """Whether the manifest lock was broken, and why (not)."""

    broken: bool
    reason: str
