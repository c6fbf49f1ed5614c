package store

import (
	"strconv"
	"testing"
)

// FuzzParseDataFile: the hand-written parser agrees with dataFileRe.
func FuzzParseDataFile(f *testing.F) {
	for _, s := range []string{"0.parquet", "12.csv", "012.parquet", "1.parquet.tmp", "123456789.csv", "1234567890.csv",
		".parquet", "a.csv", "1.PARQUET", "1.json", "-1.csv", "1e3.csv", "१.csv", "1.csv\n", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		n, fm, ok := parseDataFile(name)
		m := dataFileRe.FindStringSubmatch(name)
		if (m != nil) != ok {
			t.Fatalf("%q: parsed %v, regexp %v", name, ok, m != nil)
		}
		if ok {
			want, _ := strconv.Atoi(m[1])
			if n != want || string(fm) != m[2] {
				t.Fatalf("%q: %d %s, regexp %d %s", name, n, fm, want, m[2])
			}
		}
	})
}
