"""QuiverDal: pyrosome's ParquetDal over the network.

Code written for pyrosome moves to a Quiver server by changing one line::

    from pyrosome import ParquetDal            # before
    dal = ParquetDal("/shared/data")

    from quiver import QuiverDal               # after
    dal = QuiverDal("grpc://quiver.internal:8815", token=...)

    dal.write(df, "sales", "orders")           # unchanged from here on
    dal.append(more, "sales", "orders")
    dal.read("sales", "orders").filter(...).collect()

The methods have pyrosome's signatures and answers: read(*keys) returns a
polars LazyFrame (fetching happens at collect(), with the columns the query
uses pushed down to the server), write(data, *keys) and append(data,
*keys) take polars DataFrames or LazyFrames and return the path of what
they made, relative to the data directory (a PurePosixPath: on a server
there is no local path), so ``.name`` is "v1" or "3.parquet" as with
pyrosome. A missing profile raises FileNotFoundError (quiver.NotFoundError
is both that and pyarrow's ArrowKeyError); columns that do not match an
append raise ValueError (pyarrow.ArrowInvalid is one).

What the server adds: every put is atomic and recorded with the SHA-256 of
its files, concurrent writers never overwrite each other, and readers see
one snapshot.
"""

from __future__ import annotations

import warnings
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

from ._client import Client, _path
from ._types import PutResult

if TYPE_CHECKING:
    import polars as pl

__all__ = ["QuiverDal"]


class QuiverDal:
    """Versioned, append-only storage for data frames on a Quiver server,
    with pyrosome's ParquetDal interface (read, write, append by keys)."""

    client: Client
    """The underlying client, for everything else Quiver does."""

    def __init__(self, url: str | None = None, *, client: Client | None = None, **connect_kwargs: Any) -> None:
        """Connect to the server at url (arguments as quiver.connect), or
        use an existing client. Nothing is read or written until used."""
        if client is not None:
            if url is not None or connect_kwargs:
                raise ValueError("give url (and connect arguments) or client=, not both")
            self.client = client
            self._owned = False
        else:
            self.client = Client(url, **connect_kwargs)
            self._owned = True

    @staticmethod
    def _profile(keys: tuple[str, ...]) -> str:
        if not keys:
            raise ValueError("At least one key is required")
        return _path(keys)

    def read(self, *keys: str) -> pl.LazyFrame:
        """Read the latest version of the data described by keys.

        Args:
            *keys: Path components naming the profile.

        Returns:
            A lazy scan over the latest version as it is now (the read is
            planned here; data is fetched at collect()).

        Raises:
            FileNotFoundError: If there is no data for keys
                (quiver.NotFoundError).
            ValueError: If there are no keys.
        """
        return self.client.scan_polars(self._profile(keys))

    def write(self, data: Any, *keys: str) -> PurePosixPath:
        """Write the data as a new version.

        Readers keep seeing the previous version until the write is complete.

        Args:
            data: The data to write (a polars DataFrame or LazyFrame, or
                anything quiver.Client.write takes).
            *keys: Path components naming the profile.

        Returns:
            The versioned directory the data was written to, relative to the
            data directory (e.g. sales/orders/v1).
        """
        res = self.client.write(self._profile(keys), data)
        return _version_dir(res)

    def append(self, data: Any, *keys: str) -> PurePosixPath:
        """Add new data to the latest version without touching existing files.

        Columns are reordered and losslessly cast to match the existing
        data. If there is no existing data this warns and writes instead,
        as pyrosome does.

        Args:
            data: The data to append. Its columns must match the existing data.
            *keys: Path components naming the profile.

        Returns:
            The path of the new file (relative to the data directory), or
            the new versioned directory if there was no existing data.

        Raises:
            ValueError: If the columns do not match the existing data
                (pyarrow.ArrowInvalid).
        """
        profile = self._profile(keys)
        res = self.client.append(profile, data)
        if res.get("mode") == "write":
            warnings.warn(f"Appending to empty data for {keys}. Writing instead", stacklevel=2)
            return _version_dir(res)
        files = res.get("files") or []
        if len(files) == 1:
            return PurePosixPath(res.get("path", profile)) / files[0]["path"]
        return _version_dir(res)

    def close(self) -> None:
        """Close the connection (if this QuiverDal made it)."""
        if self._owned:
            self.client.close()

    def __enter__(self) -> QuiverDal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"QuiverDal({self.client.url!r})"


def _version_dir(res: PutResult) -> PurePosixPath:
    return PurePosixPath(res.get("path", "")) / res.get("version", "")


