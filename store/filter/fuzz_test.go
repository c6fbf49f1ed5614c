package filter

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// checkParsed holds for any filter a parser accepted: its JSON form reads
// back to the same filter, and binding and evaluating it on testRows
// fails only with ErrInvalid, never a panic.
func checkParsed(t *testing.T, e *Expr, err error) {
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("error not ErrInvalid: %v", err)
		}
		return
	}
	j, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	back, err := ParseJSON(j)
	if err != nil {
		t.Fatalf("JSON form %s does not parse: %v", j, err)
	}
	if back.String() != e.String() {
		t.Fatalf("JSON round trip: %s, want %s", back, e)
	}
	b, err := Bind(e, testSchema)
	if err != nil {
		if !errors.Is(err, ErrInvalid) {
			t.Fatalf("bind error not ErrInvalid: %v", err)
		}
		return
	}
	rec := testBatch(t)
	if _, err := b.Mask(rec); err != nil {
		t.Fatalf("mask: %v", err)
	}
	out, err := b.Apply(t.Context(), rec, memory.DefaultAllocator)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if out != nil {
		out.Release()
	}
	b.Eval(nil)
}

func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{
		`{"and": [{"col": "region", "op": "=", "value": "eu"}, {"col": "total", "op": ">", "value": 100}]}`,
		`{"or": [{"not": {"col": "f", "op": "is_null"}}, {"col": "d", "op": "in", "value": ["2024-01-01", 19000]}]}`,
		`{"col": "ts", "op": "<=", "value": "2024-01-01T00:00:00Z"}`,
		`{"col": "flag", "op": "!=", "value": true}`,
		`{"col": "big", "op": ">=", "value": 1e3}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseJSON(b)
		checkParsed(t, e, err)
	})
}

func FuzzParseWhere(f *testing.F) {
	for _, s := range []string{
		"region = 'eu' and total > 100",
		`not ("f" is null) or d in ('2024-01-01', 19000)`,
		"ts <= '2024-01-01T00:00:00Z' and flag != true and big >= 1e3",
		"region=eu",
		"total not in (1, -2.5, +3)",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		e, err := ParseWhere(s)
		checkParsed(t, e, err)
	})
}

func FuzzParseSubstrait(f *testing.F) {
	files, _ := filepath.Glob("testdata/*.substrait")
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseSubstrait(b)
		checkParsed(t, e, err)
	})
}
