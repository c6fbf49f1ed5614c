"""Generate testdata/pyrosome-<version>/: a small data directory written by pyrosome itself.

Run it with the project venv (CPython 3.14, pinned pyrosome/polars/pyarrow):

    "$(scripts/pyenv.sh)" testdata/gen_pyrosome_fixture.py

It deletes and rewrites testdata/pyrosome-<installed pyrosome version>/, then
writes EXPECTED.json there: for each profile the latest version, its row count,
the column names and types as pyarrow reports them (and as polars, i.e.
pyrosome's own `read`, reports them), the rows as JSON, and the files of every
version. All data is fixed, so reruns with the same pins give the same bytes
(the parquet files name the polars build in `created_by`).

Profiles, all written through pyrosome's public API:

* ("sales", "orders")  ParquetDal: write (v0), append (v0/1.parquet, columns in
  another order and id as Int32, which pyrosome reorders and casts), write (v1).
  v1 also holds `.half-written.parquet.tmp`, the first half of a real parquet
  file, standing in for an append that died while writing its temp file.
  pyrosome's own temp files are named `.<uuid4 hex>.parquet.tmp`.
* ("events",)          ParquetDal, append only: 3 appends. The first one finds no
  data, warns and writes v0; the next two add v0/1.parquet and v0/2.parquet.
* ("exports", "daily") CsvDal: write (v0/0.csv) and append (v0/1.csv).

Rows are listed in pyrosome's read order: data files by index, then file order.
Dates are "YYYY-MM-DD", timestamps ISO 8601 (with "+00:00" when tz-aware).
"""

import datetime as dt
import json
import shutil
import sys
import warnings
from importlib.metadata import version
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from pyrosome import CsvDal, ParquetDal

UTC = dt.UTC
HERE = Path(__file__).resolve().parent

ORDERS_SCHEMA = {
    "id": pl.Int64,
    "name": pl.String,
    "amount": pl.Float64,
    "order_date": pl.Date,
    "created_at": pl.Datetime("us", "UTC"),
}


def orders_v0() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["alice", "bob", "carol"],
            "amount": [9.5, 20.0, 7.25],
            "order_date": [dt.date(2024, 1, 2), dt.date(2024, 1, 2), dt.date(2024, 1, 3)],
            "created_at": [
                dt.datetime(2024, 1, 2, 9, 30, 0, tzinfo=UTC),
                dt.datetime(2024, 1, 2, 17, 5, 12, 250000, tzinfo=UTC),
                dt.datetime(2024, 1, 3, 8, 0, 0, tzinfo=UTC),
            ],
        },
        schema=ORDERS_SCHEMA,
    )


def orders_v0_append() -> pl.DataFrame:
    # columns in another order, id as Int32: pyrosome selects and casts to the
    # stored schema before writing
    return pl.DataFrame(
        {
            "created_at": [
                dt.datetime(2024, 1, 4, 12, 0, 0, tzinfo=UTC),
                dt.datetime(2024, 1, 5, 23, 59, 59, 999999, tzinfo=UTC),
            ],
            "amount": [12.0, 0.5],
            "name": ["dave", None],
            "id": [4, 5],
            "order_date": [dt.date(2024, 1, 4), dt.date(2024, 1, 5)],
        },
        schema={
            "created_at": pl.Datetime("us", "UTC"),
            "amount": pl.Float64,
            "name": pl.String,
            "id": pl.Int32,
            "order_date": pl.Date,
        },
    )


def orders_v1() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "id": [10, 11, 12, 13],
            "name": ["erin", "frank", None, "héloïse"],
            "amount": [100.0, -3.5, 0.0, 42.125],
            "order_date": [
                dt.date(2024, 2, 1),
                dt.date(2024, 2, 1),
                dt.date(2024, 2, 29),
                dt.date(1999, 12, 31),
            ],
            "created_at": [
                dt.datetime(2024, 2, 1, 0, 0, 0, tzinfo=UTC),
                dt.datetime(2024, 2, 1, 0, 0, 1, tzinfo=UTC),
                dt.datetime(2024, 2, 29, 12, 34, 56, 789000, tzinfo=UTC),
                dt.datetime(1999, 12, 31, 23, 59, 59, tzinfo=UTC),
            ],
        },
        schema=ORDERS_SCHEMA,
    )


EVENTS_SCHEMA = {
    "seq": pl.Int64,
    "ts": pl.Datetime("us"),  # no time zone
    "kind": pl.String,
    "ok": pl.Boolean,
}


def event_batches() -> list[pl.DataFrame]:
    return [
        pl.DataFrame(
            {
                "seq": [1, 2],
                "ts": [dt.datetime(2024, 3, 1, 10, 0, 0), dt.datetime(2024, 3, 1, 10, 0, 5)],
                "kind": ["start", "tick"],
                "ok": [True, True],
            },
            schema=EVENTS_SCHEMA,
        ),
        pl.DataFrame(
            {
                "seq": [3, 4],
                "ts": [dt.datetime(2024, 3, 1, 10, 0, 10), dt.datetime(2024, 3, 1, 10, 0, 15)],
                "kind": ["tick", "error"],
                "ok": [True, False],
            },
            schema=EVENTS_SCHEMA,
        ),
        pl.DataFrame(
            {
                "seq": [5],
                "ts": [dt.datetime(2024, 3, 1, 10, 1, 0)],
                "kind": ["stop"],
                "ok": [None],
            },
            schema=EVENTS_SCHEMA,
        ),
    ]


DAILY_SCHEMA = {
    "day": pl.Date,
    "region": pl.String,
    "orders": pl.Int64,
    "total": pl.Float64,
}


def daily_v0() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "day": [dt.date(2024, 1, 2), dt.date(2024, 1, 2)],
            "region": ["eu", "us"],
            "orders": [2, 1],
            "total": [29.5, 7.25],
        },
        schema=DAILY_SCHEMA,
    )


def daily_append() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "day": [dt.date(2024, 1, 3)],
            "region": ["eu, north"],  # a comma, so the CSV writer has to quote
            "orders": [3],
            "total": [12.5],
        },
        schema=DAILY_SCHEMA,
    )


STRAY = Path("sales/orders/v1/.half-written.parquet.tmp")


def build(root: Path) -> None:
    dal = ParquetDal(root)
    csv_dal = CsvDal(root)

    assert dal.write(orders_v0(), "sales", "orders") == root / "sales/orders/v0"
    assert dal.append(orders_v0_append(), "sales", "orders") == root / "sales/orders/v0/1.parquet"
    assert dal.write(orders_v1(), "sales", "orders") == root / "sales/orders/v1"

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = dal.append(event_batches()[0], "events")
    assert first == root / "events/v0", first
    assert any("Appending to empty data" in str(w.message) for w in caught), caught
    assert dal.append(event_batches()[1], "events") == root / "events/v0/1.parquet"
    assert dal.append(event_batches()[2], "events") == root / "events/v0/2.parquet"

    assert csv_dal.write(daily_v0(), "exports", "daily") == root / "exports/daily/v0"
    assert csv_dal.append(daily_append(), "exports", "daily") == root / "exports/daily/v0/1.csv"

    # a temp file left behind by a crashed append: half of a real parquet file
    # (starts with the PAR1 magic, has no footer). Not read-only: pyrosome only
    # drops write permission once a temp file is complete.
    whole = (root / "sales/orders/v1/0.parquet").read_bytes()
    (root / STRAY).write_bytes(whole[: len(whole) // 2])


def json_value(value: Any) -> Any:
    if isinstance(value, dt.datetime):
        return value.isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def read_with_pyarrow(files: list[Path], fmt: str) -> pa.Table:
    if fmt == "parquet":
        tables = [pq.read_table(f) for f in files]
    else:
        tables = [pa_csv.read_csv(f) for f in files]
    return pa.concat_tables(tables)


def describe(root: Path, keys: tuple[str, ...], fmt: str, expected: pl.DataFrame) -> dict[str, Any]:
    profile = root.joinpath(*keys)
    dal = CsvDal(root) if fmt == "csv" else ParquetDal(root)
    manifest_text = (profile / "manifest.json").read_text()
    latest = json.loads(manifest_text)["latest_data_dir"]

    versions: dict[str, Any] = {}
    for vdir in sorted(p for p in profile.iterdir() if p.is_dir()):
        names = sorted(p.name for p in vdir.iterdir())
        data = sorted(
            (n for n in names if n.endswith(f".{fmt}") and not n.startswith(".")),
            key=lambda n: int(n.split(".")[0]),
        )
        table = read_with_pyarrow([vdir / n for n in data], fmt)
        versions[vdir.name] = {
            "data_files": data,
            "other_files": [n for n in names if n not in data],
            "row_count": table.num_rows,
        }

    files = [profile / latest / n for n in versions[latest]["data_files"]]
    table = read_with_pyarrow(files, fmt)
    via_pyrosome = dal.read(*keys).collect()

    # what pyrosome reads back must be what was written
    if fmt == "csv":  # CsvDal infers types on read: dates come back as strings
        assert via_pyrosome.equals(expected.with_columns(pl.col(pl.Date).cast(pl.String))), via_pyrosome
    else:
        assert via_pyrosome.equals(expected), (via_pyrosome, expected)
        # and pyarrow must agree with polars, row for row
        assert pl.from_arrow(table).equals(expected)

    return {
        "keys": list(keys),
        "format": fmt,
        "manifest_json": manifest_text,
        "latest_version": latest,
        "row_count": table.num_rows,
        "columns": [
            {"name": f.name, "type": str(f.type), "polars_type": str(via_pyrosome.schema[f.name])}
            for f in table.schema
        ],
        "rows": [{k: json_value(v) for k, v in row.items()} for row in table.to_pylist()],
        "versions": versions,
    }


def main() -> int:
    pyrosome_version = version("pyrosome")
    root = HERE / f"pyrosome-{pyrosome_version}"
    if root.exists():
        shutil.rmtree(root)
    root.mkdir(parents=True)
    build(root)

    orders_latest = orders_v1()
    events_all = pl.concat(event_batches())
    daily_all = pl.concat([daily_v0(), daily_append()])
    expected = {
        "generated_by": "testdata/gen_pyrosome_fixture.py",
        "python": sys.version.split()[0],
        "pyrosome": pyrosome_version,
        "polars": version("polars"),
        "pyarrow": version("pyarrow"),
        "notes": [
            "types are pyarrow's: pyarrow.parquet.read_table for parquet (polars stores an "
            "ARROW:schema, hence large_string), pyarrow.csv.read_csv inference for csv",
            "polars_type is what pyrosome's read() gives: CsvDal infers types, so dates are String",
            "rows are the latest version in read order: data files by index, then file order",
            "data files are chmod a-w by pyrosome; git does not keep that",
            f"{STRAY.as_posix()} is a hand-made stray temp file that readers must ignore",
        ],
        "profiles": {
            "sales/orders": describe(root, ("sales", "orders"), "parquet", orders_latest),
            "events": describe(root, ("events",), "parquet", events_all),
            "exports/daily": describe(root, ("exports", "daily"), "csv", daily_all),
        },
    }
    (root / "EXPECTED.json").write_text(json.dumps(expected, indent=2, ensure_ascii=False) + "\n")
    print(root)
    return 0


if __name__ == "__main__":
    sys.exit(main())
