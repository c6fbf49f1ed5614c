package jsonlen

import (
	"encoding/json"
	"math/rand"
	"strings"
	"testing"
)

// check fails t unless String(s) is the length json.Marshal writes.
func check(t *testing.T, s string) {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	if got := String(s); got != len(b) {
		t.Fatalf("String(%q) = %d, encoding/json writes %d bytes (%s)", s, got, len(b), b)
	}
}

func TestString(t *testing.T) {
	for _, s := range []string{"", "v0/1.parquet", "v1/k=a b/2.csv", `k="q"\`, "k=<&>", "k=\n\t\x01\b\f\r\x7f", "k=é€😀", "k=\u2028\u2029", "k=\xff", "\xed\xa0\x80", "\xf0\x9f\x98"} {
		check(t, s)
	}
	r := rand.New(rand.NewSource(3))
	pieces := []string{"a", "é", "<", ">", "&", "\"", "\\", "\n", "\x00", "\x1f", "\b", "\u2028", "\xff", "\xc3", "%2F", "北", "😀"}
	for range 20000 {
		var sb strings.Builder
		for k := r.Intn(20); k > 0; k-- {
			sb.WriteString(pieces[r.Intn(len(pieces))])
		}
		check(t, sb.String())
	}
}

func FuzzString(f *testing.F) {
	for _, s := range []string{"", "a<b", "\xff\u2028", "k=\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) { check(t, s) })
}
