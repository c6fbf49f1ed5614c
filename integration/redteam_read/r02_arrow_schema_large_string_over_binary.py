#!/usr/bin/env python3
from common import *  # noqa: F401,F403 (the shared helpers, imports and temp dir)
# r02: the footer's ARROW:schema check lets `large_string` through over a plain
# BYTE_ARRAY (binary, no String/UTF8 annotation) column. Quiver then serves
# bytes that are not UTF-8 as large_string (an invalid Arrow array: a pyarrow
# client's to_pylist()/validate(full=True) fail). pyarrow reading the same file
# keeps the Parquet type (binary). The same check refuses `string` correctly
# (that case is served as binary), so only the large variant slips through.
# Also the reverse: a String column whose ARROW:schema claims large_binary is
# served as large_binary (pyarrow: string).
# Kept as a test (integration/test_redteam.py): served data must be valid
# Arrow, or the read refused as corrupt (what Quiver does now).
# Exit 1 while the bug is present.
bad = 0
p, c = start(int(os.environ.get("PORT", "19151")))
try:
    raw = parquet_bytes(pa.table({"x": pa.array([b"ok", b"\xff\xfe not utf8", None, b"\xc3"], pa.binary())}))
    for claimed in [pa.string(), pa.large_string()]:
        sch = base64.b64encode(pa.schema([pa.field("x", claimed)]).serialize().to_pybytes())
        data = set_kv(raw, b"ARROW:schema", sch)
        key = f"r02/bin_as_{claimed}"
        plant(key, data)
        ref_type = pq.read_table(os.path.join(DATA, key, "v0", "0.parquet")).schema.field("x").type
        # Served, it must be valid Arrow; or refused as corrupt (the
        # file's Arrow schema calls bytes that are not UTF-8 a string).
        try:
            got = doget(c, key)
        except fl.FlightError as e:
            refused = "data loss" in str(e).lower() and "corrupt" in str(e)
            print(f"binary column, ARROW:schema says {claimed}: refused ({'DATA_LOSS' if refused else e})")
            bad += not refused
            continue
        typ = got.schema.field("x").type
        try:
            got.validate(full=True); valid = True
        except pa.ArrowInvalid as e:
            valid = False
        print(f"binary column, ARROW:schema says {claimed}: quiver serves {typ} (valid={valid}); pyarrow reads {ref_type}")
        if not valid:
            bad += 1
    raw = parquet_bytes(pa.table({"x": pa.array(["a", "bc", None], pa.string())}))
    data = set_kv(raw, b"ARROW:schema", base64.b64encode(pa.schema([pa.field("x", pa.large_binary())]).serialize().to_pybytes()))
    plant("r02/str_as_lbin", data)
    got = doget(c, "r02/str_as_lbin")
    ref_type = pq.read_table(os.path.join(DATA, "r02/str_as_lbin", "v0", "0.parquet")).schema.field("x").type
    # Valid either way (Quiver keeps the stored Arrow type): only printed.
    print(f"string column, ARROW:schema says large_binary: quiver serves {got.schema.field('x').type}; pyarrow reads {ref_type}")
    got.validate(full=True)
finally:
    stop(p); shutil.rmtree(TMP, ignore_errors=True)
print("BUG PRESENT" if bad else "fixed")
sys.exit(1 if bad else 0)
