#!/usr/bin/env python3
"""e09 (LOW): the NDJSON reader trims Unicode white space (U+00A0 NBSP,
U+3000, U+0085, U+2028/2029, form feed, vertical tab) around a line and takes
the line, though none of these is JSON white space (RFC 8259: space, tab, LF,
CR) and the same characters inside the object are refused ("invalid JSON at
column 7: '\\u00a0'..."). pyarrow, Python's json and Go's encoding/json refuse
these lines. Quiver's scanner is said to be held to encoding/json's answers;
here it is not. Nothing is lost, but invalid (possibly mangled) input is taken
silently and the two places disagree.
"""
import sys, os, json
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from elib import *

s = Server()
try:
    taken = []
    for i, (name, line) in enumerate([("NBSP before", '\u00a0{"a":1}'), ("IDEOGRAPHIC SPACE after", '{"a":1}\u3000'),
                                      ("NEL after", '{"a":1}\u0085'), ("U+2028 before", '\u2028{"a":1}'),
                                      ("form feed after", '{"a":1}\x0c'), ("vertical tab after", '{"a":1}\x0b')]):
        try:
            json.loads(line); valid = True
        except ValueError:
            valid = False
        r = s.put(f"t/w{i}", s.write(f"w{i}.ndjson", line + "\n"))
        print(f"{name:24} json.loads valid={valid}  quiver put exit {r.returncode}")
        if r.returncode == 0 and not valid:
            taken.append(name)
    r = s.put("t/inside", s.write("inside.ndjson", '{"a":1\u00a0}\n'))
    print("NBSP inside the object: exit", r.returncode, out(r)[-90:])
    verdict(not taken, "lines that are not JSON refused, as the same characters inside the object are",
            "taken: " + ", ".join(taken))
finally:
    s.cleanup()
