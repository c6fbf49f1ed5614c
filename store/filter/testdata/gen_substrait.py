"""Regenerates the Substrait fixtures of substrait_test.go: pyarrow.dataset
expressions serialized with pyarrow.substrait.serialize_expressions, each
written as <name>.substrait next to the --where text it must parse to.

    python store/filter/testdata/gen_substrait.py
"""

import datetime
import json
import os

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.substrait as ps

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA = pa.schema([
    ("region", pa.string()), ("total", pa.int32()), ("d", pa.date32()),
    ("ts", pa.timestamp("us")), ("s", pa.struct([("a", pa.int64())])), ("f", pa.float64()),
    ("big", pa.int64()), ("flag", pa.bool_()),
])
f = pc.field
CASES = {
    "and_or_not": (((f("region") == "eu") & (f("total") > 100)) | ~f("f").is_null(),
                   "region = 'eu' and total > 100 or not f is null"),
    "isin": (f("region").isin(["a", "b"]), "region in ('a', 'b')"),
    "date": (f("d") >= datetime.date(2024, 1, 2), "d >= '2024-01-02'"),
    "timestamp": (f("ts") < pa.scalar(datetime.datetime(2024, 1, 1), pa.timestamp("us")), "ts < '2024-01-01T00:00:00Z'"),
    "is_valid": (f("f").is_valid(), "f is not null"),
    "after_struct": (f("big") != 7, "big != 7"),
    "flipped": (pc.scalar(5) < f("big"), "big > 5"),
    "bool": (f("flag") == True, "flag = true"),  # noqa: E712
    "float": (f("f") <= 2.5, "f <= 2.5"),
}
UNSUPPORTED = {"is_nan": f("f").is_nan(), "add": (f("big") + 1) > 3}

index = {}
for name, (expr, where) in CASES.items():
    with open(os.path.join(HERE, name + ".substrait"), "wb") as out:
        out.write(bytes(ps.serialize_expressions([expr], ["x"], SCHEMA)))
    index[name] = where
for name, expr in UNSUPPORTED.items():
    with open(os.path.join(HERE, "unsupported_" + name + ".substrait"), "wb") as out:
        out.write(bytes(ps.serialize_expressions([expr], ["x"], SCHEMA)))
with open(os.path.join(HERE, "substrait.json"), "w") as out:
    json.dump({"pyarrow": pa.__version__, "cases": index}, out, indent=1, sort_keys=True)
    out.write("\n")
