"""Errors as Quiver's users should read them.

pyarrow turns a gRPC status into an exception whose class tells the code
(ArrowKeyError for NOT_FOUND, ArrowInvalid for INVALID_ARGUMENT,
FlightUnavailableError for UNAVAILABLE, ...) and whose message wraps the
server's words in transport detail ("Flight returned not found error, with
message: ... gRPC client debug context: ... Client context: ..."). The
client re-raises the *same class* (for NOT_FOUND a subclass, NotFoundError,
that is also a FileNotFoundError as pyrosome raises) with the server's
message alone; the full pyarrow text stays on the exception as ``detail``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.flight as flight

__all__ = ["NotFoundError", "clean_message", "suggest", "translate"]


class NotFoundError(pa.ArrowKeyError, FileNotFoundError):
    """NOT_FOUND from the server: no such profile or version, or a file a
    pinned read needs is gone.

    It is a ``pyarrow.ArrowKeyError`` (what pyarrow raises for NOT_FOUND)
    and a ``FileNotFoundError`` (what pyrosome raises for missing data), so
    either ``except`` clause catches it.
    """

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


_FLIGHT_PREFIX = re.compile(r"^(?:Flight|gRPC) returned (?P<kind>[a-z ]+?) error, with message: (?P<msg>.*)$", re.S)
_DEBUG_SUFFIX = ". gRPC client debug context: "
_UNKNOWN_FIELD = re.compile(r'unknown field "(?P<field>[^"]+)"')


def clean_message(exc: BaseException) -> tuple[str | None, str]:
    """Split pyarrow's text of a Flight error into (kind, server message).

    kind is pyarrow's name of the status ("not found", "invalid argument",
    "unavailable", ...) or None when the text is not a Flight status.
    """
    text = str(exc)
    m = _FLIGHT_PREFIX.match(text)
    if not m:
        return None, text
    msg = m.group("msg")
    cut = msg.find(_DEBUG_SUFFIX)
    if cut >= 0:
        msg = msg[:cut]
    return m.group("kind"), msg


def unknown_field(exc: BaseException) -> str | None:
    """The field an INVALID_ARGUMENT names as unknown (a server that does
    not take it yet), or None."""
    if not isinstance(exc, pa.ArrowInvalid):
        return None
    m = _UNKNOWN_FIELD.search(str(exc))
    return m.group("field") if m else None


def _rebuild(exc: BaseException, message: str) -> BaseException:
    """An exception of exc's class (NotFoundError for ArrowKeyError) with
    message; exc itself when its class cannot be built from a message."""
    cls: type[BaseException] = type(exc)
    if cls is pa.ArrowKeyError:
        cls = NotFoundError
    try:
        if issubclass(cls, flight.FlightError):
            new = cls(message, getattr(exc, "extra_info", b"") or b"")
        else:
            new = cls(message)
    except Exception:  # an exotic constructor: keep the original
        return exc
    return new


def translate(exc: BaseException, url: str, *, hint: str = "") -> BaseException:
    """The exception to raise for exc, caught from a pyarrow Flight call to
    url: the same class (or NotFoundError for ArrowKeyError) carrying the
    server's message, with ``detail`` (pyarrow's full text) and ``kind``.

    Exceptions that are not Flight statuses are returned unchanged.
    """
    kind, msg = clean_message(exc)
    if kind is None:
        return exc
    if isinstance(exc, flight.FlightUnavailableError) and (
        "failed to connect" in msg or "Connection refused" in msg or "DNS resolution failed" in msg
    ):
        last = msg.rsplit(": ", 1)[-1]
        msg = f"cannot reach a quiver server at {url} (is `quiver serve` running?): {last}"
    if hint:
        msg = f"{msg} {hint}"
    new = _rebuild(exc, msg)
    if new is not exc:
        try:
            new.detail = str(exc)  # type: ignore[attr-defined]
            new.kind = kind  # type: ignore[attr-defined]
        except AttributeError:
            pass
    return new


def _distance(a: str, b: str) -> int:
    """Optimal string alignment distance (Levenshtein with transpositions)."""
    prev2: list[int] = []
    prev = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        cur = [i] + [0] * len(b)
        for j, cb in enumerate(b, 1):
            cost = 0 if ca == cb else 1
            cur[j] = min(prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost)
            if i > 1 and j > 1 and ca == b[j - 2] and a[i - 2] == cb:
                cur[j] = min(cur[j], prev2[j - 2] + 1)
        prev2, prev = prev, cur
    return prev[len(b)]


def suggest(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """The profiles a mistyped name most likely meant, best first.

    The same rule as the quiver command's "did you mean" (cmd/quiver/hints.go):
    a case-insensitive edit distance of at most len/4 (2 to 4), or, for a
    name of one key, a profile whose last key it is ("orders" for
    "sales/orders").
    """
    name = name.strip("/")
    want = name.lower()
    if not want:
        return []
    limit = max(2, min(4, len(want) // 4))
    one_key = "/" not in want
    scored: list[tuple[int, str]] = []
    for c in candidates:
        if c == name:
            continue
        lc = c.lower()
        d = _distance(want, lc)
        if d <= limit:
            scored.append((d, c))
        elif one_key and lc.endswith("/" + want):
            scored.append((limit + 1, c))
    scored.sort()
    return [c for _, c in scored[:n]]
