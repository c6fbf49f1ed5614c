"""The examples of pyrosome's Concepts page, run against data dirs that a
Quiver server maintains (docs/clients.md reports which hold).

Two ways:

A. pyrosome runs the page's examples verbatim (as doctests) in a directory
   whose "data" and "exports" data dirs are served by running Quiver
   servers; after each example Quiver's view of the same data is checked.
B. Quiver does the writing (through Flight), and the page's reads and checks
   run against what it wrote, with pyrosome and through Quiver.

The examples are copied from pyrosome 0.1.12's Concepts page
(docs/concepts in the pyrosome project); the prose is left out.
"""

from __future__ import annotations

import datetime
import doctest
import io
import json

import polars as pl
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from pyrosome import CsvDal, ParquetDal

from helpers import OPTS, SECRET, get, profile_dir, put

# pyrosome writes into the server's data dir: a local disk only.
pytestmark = pytest.mark.local_storage

# (section of the Concepts page, its examples verbatim)
EXAMPLES: list[tuple[str, str]] = [
    (
        "setup",
        """
>>> import json
>>> from pathlib import Path
>>> import polars as pl
>>> from pyrosome import ParquetDal, CsvDal
>>> data_dir = Path("data")
>>> dal = ParquetDal(data_dir)
""",
    ),
    (
        "on-disk layout",
        """
>>> _ = dal.write(pl.DataFrame({"id": [1]}), "sales", "orders")
>>> _ = dal.append(pl.DataFrame({"id": [2]}), "sales", "orders")
>>> _ = dal.write(pl.DataFrame({"id": [3]}), "sales", "orders")
>>> profile_dir = data_dir / "sales" / "orders"
>>> sorted(path.relative_to(profile_dir).as_posix() for path in profile_dir.rglob("*"))
['manifest.json', 'v0', 'v0/.1.parquet.claim', 'v0/0.parquet', 'v0/1.parquet', 'v1', 'v1/0.parquet']
>>> json.loads((profile_dir / "manifest.json").read_text())
{'latest_data_dir': 'v1'}
>>> _ = (profile_dir / "v1" / ".half-written.parquet.tmp").write_bytes(b"")
>>> dal.read("sales", "orders").collect()["id"].to_list()
[3]
""",
    ),
    (
        "keys",
        """
>>> dal.read("sales/orders").collect()["id"].to_list()
[3]
>>> dal.read()
Traceback (most recent call last):
...
ValueError: At least one key is required
>>> dal.read("..")
Traceback (most recent call last):
...
ValueError: Profile directory data/.. is not within data directory data
>>> dal.read("sales")
Traceback (most recent call last):
...
FileNotFoundError: Cannot find files for ('sales',)
""",
    ),
    (
        "versions",
        """
>>> dal.append(pl.DataFrame({"name": ["x"]}), "sales", "orders")
Traceback (most recent call last):
...
ValueError: Columns ['name'] do not match existing columns ['id'] for ('sales', 'orders')
""",
    ),
    (
        "don't mix formats",
        """
>>> _ = CsvDal(data_dir).write(pl.DataFrame({"id": [4]}), "sales", "orders")
>>> dal.read("sales", "orders")
Traceback (most recent call last):
...
FileNotFoundError: Cannot find files for ('sales', 'orders')
""",
    ),
    (
        "CSV types are inferred",
        """
>>> import datetime
>>> typed = pl.DataFrame(
...     {"day": [datetime.date(2026, 10, 24)], "n": pl.Series([1], dtype=pl.Int8)}
... )
>>> csv_dal = CsvDal(Path("exports"))
>>> _ = csv_dal.write(typed, "typed")
>>> csv_dal.read("typed").collect_schema()
Schema({'day': String, 'n': Int64})
""",
    ),
]


def ids(c: flight.FlightClient, ticket) -> list:
    return get(c, ticket).column("id").to_pylist()


# --- A: pyrosome writes, Quiver serves -------------------------------------------------------------


def quiver_view(section: str, data: flight.FlightClient, exports: flight.FlightClient) -> None:
    """What Quiver serves after each section of the page, run by pyrosome."""
    if section == "on-disk layout":
        assert ids(data, "sales/orders") == [3]  # the stray .tmp is not data
        assert ids(data, {"path": "sales/orders", "version": "v0"}) == [1, 2]
        assert [i.descriptor.path for i in data.list_flights(options=OPTS)] == [[b"sales", b"orders"]]
    elif section == "keys":
        assert ids(data, "sales/orders") == ids(data, {"keys": ["sales", "orders"]}) == [3]
        with pytest.raises(pa.ArrowInvalid):
            put(data, flight.FlightDescriptor.for_path(), pa.table({"id": [1]}))
        with pytest.raises(pa.ArrowInvalid, match="outside the data directory") as e:
            get(data, "..")
        assert SECRET not in str(e.value)
        with pytest.raises(pa.ArrowKeyError, match="profile not found"):
            get(data, "sales")
    elif section == "versions":
        with pytest.raises(pa.ArrowInvalid, match=r'columns \["name"\] do not match existing columns \["id"\]'):
            put(data, "sales/orders", pa.table({"name": ["x"]}))
    elif section == "don't mix formats":
        # Quiver follows the manifest: the latest version is CSV, so it serves that
        assert ids(data, "sales/orders") == [4]
        assert get(data, "sales/orders").schema == pa.schema([("id", pa.int64())])
    elif section == "CSV types are inferred":
        desc = flight.FlightDescriptor.for_path("typed")
        assert exports.get_schema(desc).schema == pa.schema([("day", pa.string()), ("n", pa.int64())])
        assert get(exports, "typed").to_pylist() == [{"day": "2026-10-24", "n": 1}]


def test_concepts_examples_run_by_pyrosome_on_quiver_data_dirs(start_server, tmp_path, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "exports").mkdir()
    data = start_server(tmp_path / "data").client()
    exports = start_server(tmp_path / "exports").client()
    monkeypatch.chdir(tmp_path)

    globs: dict = {}
    parser = doctest.DocTestParser()
    runner = doctest.DocTestRunner(optionflags=0)
    failed = {}
    for section, text in EXAMPLES:
        test = parser.get_doctest(text, globs, section, "pyrosome-concepts", 0)
        out = io.StringIO()
        result = runner.run(test, out=out.write, clear_globs=False)
        globs = test.globs  # the examples build on each other
        if result.failed:
            failed[section] = out.getvalue()
        assert section not in failed, f"Concepts example {section!r} does not hold when pyrosome runs it:\n{failed[section]}"
        quiver_view(section, data, exports)
    assert not failed, "Concepts examples that do not hold:\n" + "\n".join(f"## {k}\n{v}" for k, v in failed.items())


# --- B: Quiver writes, pyrosome (and Quiver) read -------------------------------------------------


QUIVER_HIDDEN = [
    ".log",  # the profile's commit log: one segment per commit, and its head
    ".log/00000000000000000001.ndjson",
    ".log/00000000000000000002.ndjson",
    ".log/00000000000000000003.ndjson",
    ".log/HEAD",
    ".quiver.kind",  # marks the directory as a profile (never nested)
    "v0/.version.json",
    "v1/.version.json",
]


@pytest.fixture
def quiver_written(start_server, tmp_path):
    (tmp_path / "data").mkdir()
    srv = start_server(tmp_path / "data")
    c = srv.client()
    put(c, "sales/orders", pa.table({"id": [1]}), mode="write")
    put(c, "sales/orders", pa.table({"id": [2]}))
    put(c, "sales/orders", pa.table({"id": [3]}), mode="write")
    return srv, c, ParquetDal(srv.data_dir)


def test_concepts_layout_when_quiver_writes(quiver_written):
    srv, c, dal = quiver_written
    pdir = profile_dir(srv, "sales/orders")
    listing = sorted(p.relative_to(pdir).as_posix() for p in pdir.rglob("*"))
    page = ["manifest.json", "v0", "v0/.1.parquet.claim", "v0/0.parquet", "v0/1.parquet", "v1", "v1/0.parquet"]
    # the page's layout, plus Quiver's hidden .version.json files, commit log and marker
    assert listing == sorted(page + QUIVER_HIDDEN)
    assert json.loads((pdir / "manifest.json").read_text()) == {"latest_data_dir": "v1"}
    (pdir / "v1" / ".half-written.parquet.tmp").write_bytes(b"")
    assert dal.read("sales", "orders").collect()["id"].to_list() == [3]
    assert ids(c, "sales/orders") == [3]


def test_concepts_keys_when_quiver_writes(quiver_written, monkeypatch):
    srv, c, dal = quiver_written
    assert dal.read("sales/orders").collect()["id"].to_list() == [3]
    with pytest.raises(ValueError, match="At least one key is required"):
        dal.read()
    monkeypatch.chdir(srv.data_dir.parent)
    with pytest.raises(ValueError, match=r"Profile directory data/\.\. is not within data directory data"):
        ParquetDal("data").read("..")
    with pytest.raises(FileNotFoundError, match=r"Cannot find files for \('sales',\)"):
        dal.read("sales")


def test_concepts_versions_when_quiver_writes(quiver_written):
    srv, c, dal = quiver_written
    with pytest.raises(ValueError, match=r"Columns \['name'\] do not match existing columns \['id'\]"):
        dal.append(pl.DataFrame({"name": ["x"]}), "sales", "orders")
    with pytest.raises(pa.ArrowInvalid, match="schema mismatch"):
        put(c, "sales/orders", pa.table({"name": ["x"]}))
    assert ids(c, "sales/orders") == [3]


def test_concepts_mixing_formats_is_refused_by_quiver(quiver_written):
    """The page warns that a CSV write to a parquet profile hides its data from
    ParquetDal. Quiver refuses it instead (FAILED_PRECONDITION), so the
    example's outcome does not arise through Quiver."""
    srv, c, dal = quiver_written
    with pytest.raises(pa.ArrowInvalid, match="format mismatch") as e:
        put(c, "sales/orders", pa.table({"id": [4]}), mode="write", format="csv")
    assert "precondition" in str(e.value)
    assert dal.read("sales", "orders").collect()["id"].to_list() == [3]


def test_concepts_csv_types_when_quiver_writes(quiver_written):
    srv, c, dal = quiver_written
    typed = pa.table({"day": [datetime.date(2026, 10, 24)], "n": pa.array([1], pa.int8())})
    put(c, "typed", typed, mode="write", format="csv")
    assert CsvDal(srv.data_dir).read("typed").collect_schema() == pl.Schema({"day": pl.String, "n": pl.Int64})
    assert c.get_schema(flight.FlightDescriptor.for_path("typed")).schema == pa.schema([("day", pa.string()), ("n", pa.int64())])


def test_concepts_no_appends_into_old_versions(quiver_written):
    """append always targets the latest version. A put that names an older
    version must be refused, not silently appended to the latest one."""
    srv, c, dal = quiver_written
    with pytest.raises(pa.ArrowInvalid, match="version"):
        put(c, "sales/orders", pa.table({"id": [9]}), version="v0")
    assert ids(c, {"path": "sales/orders", "version": 0}) == [1, 2]
    assert ids(c, "sales/orders") == [3]
