package main

import "testing"

func TestParseBytes(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"268435456", 268435456, true}, {"256MiB", 256 << 20, true}, {"1GiB", 1 << 30, true},
		{"512MB", 512e6, true}, {"10 KiB", 10 << 10, true}, {"", 0, false}, {"-1", 0, false}, {"lots", 0, false}, {"1.5GiB", 0, false},
	} {
		got, err := parseBytes(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("parseBytes(%q) = %d, %v", c.in, got, err)
		}
	}
}
