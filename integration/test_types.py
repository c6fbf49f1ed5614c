"""The type round-trip matrix: DoPut -> DoGet through a real server must give
back exactly the table that was put, schema metadata included
(Table.equals(check_metadata=True)); GetSchema and GetFlightInfo agree; an
append of the same table is accepted and read back after it.

Types that cannot round-trip are xfail(strict=True) with the reason
(typecases.LIMITS) and listed in docs/clients.md; the cases in
typecases.BUGS are Quiver bugs and fail until fixed.
"""

from __future__ import annotations

import math

import pyarrow as pa
import pyarrow.flight as flight
import pytest

from helpers import OPTS, SECRET, assert_tables_equal, get, put
from typecases import CASES, LIMITS


def params():
    for name in CASES:
        marks = [pytest.mark.xfail(strict=True, reason=LIMITS[name])] if name in LIMITS else []
        yield pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("name", list(params()))
def test_round_trip(client, name):
    table = CASES[name]
    path = f"types/{name}"
    desc = flight.FlightDescriptor.for_path("types", name)

    res = put(client, path, table, mode="write")
    assert res["rows"] == table.num_rows

    assert_tables_equal(get(client, path), table)
    assert client.get_schema(desc, options=OPTS).schema.equals(table.schema, check_metadata=True)
    info = client.get_flight_info(desc, options=OPTS)
    assert info.schema.equals(table.schema, check_metadata=True)
    assert info.total_records == table.num_rows
    via_endpoints = [client.do_get(ep.ticket, options=OPTS).read_all() for ep in info.endpoints]
    if table.num_columns == 0:
        # pyarrow's concat_tables drops the row count of column-less tables
        assert sum(t.num_rows for t in via_endpoints) == table.num_rows
    else:
        assert_tables_equal(pa.concat_tables(via_endpoints), table)

    # the same schema appends cleanly into the version, and reads back after it
    res = put(client, path, table)
    assert (res["version"], res["index"]) == ("v0", 1)
    if table.num_columns == 0:
        assert get(client, path).num_rows == 2 * table.num_rows
    else:
        assert_tables_equal(get(client, path), pa.concat_tables([table, table]))


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_unstorable_type_is_refused_clearly(client, name):
    """What Parquet (or arrow-go) cannot store is refused at put time with
    INVALID_ARGUMENT naming the profile, and nothing is created."""
    path = f"refused/{name}"
    with pytest.raises(pa.ArrowInvalid) as e:
        put(client, path, CASES[name], mode="write")
    msg = str(e.value)
    assert "invalid argument" in msg, msg
    assert "cannot be stored as Parquet" in msg and path in msg, msg
    assert SECRET not in msg
    with pytest.raises(pa.ArrowKeyError):
        get(client, path)


def test_float_nan_and_signed_zero(client):
    # Table.equals treats NaN as unequal to itself: compare the values one by one
    t = pa.table({"f64": pa.array([math.nan, -0.0, math.inf], pa.float64()), "f32": pa.array([math.nan, -0.0, -math.inf], pa.float32())})
    put(client, "types/nan", t, mode="write")
    got = get(client, "types/nan")
    assert got.schema == t.schema
    for name in t.column_names:
        a, b = got.column(name).to_pylist(), t.column(name).to_pylist()
        assert math.isnan(a[0]) and math.copysign(1, a[1]) == -1 and a[2] == b[2]


def test_widening_append_keeps_the_version_type(client):
    """An append with narrower types is cast losslessly to the version's schema."""
    wide = pa.table({"i": pa.array([1], pa.int64()), "f": pa.array([1.5], pa.float64()), "s": pa.array(["a"], pa.large_string())})
    narrow = pa.table({"i": pa.array([2], pa.int8()), "f": pa.array([2.5], pa.float32()), "s": pa.array(["b"], pa.string())})
    put(client, "types/widen", wide, mode="write")
    put(client, "types/widen", narrow)
    assert_tables_equal(get(client, "types/widen"), pa.table({"i": pa.array([1, 2], pa.int64()), "f": [1.5, 2.5], "s": pa.array(["a", "b"], pa.large_string())}))
    # a narrowing or lossy change is refused
    with pytest.raises(pa.ArrowInvalid, match="schema mismatch"):
        put(client, "types/widen", narrow.cast(pa.schema([("i", pa.int64()), ("f", pa.float64()), ("s", pa.string())])).set_column(0, "i", pa.array(["x"])))
