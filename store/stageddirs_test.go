package store

import (
	"slices"
	"testing"
)

// TestStagedDirs: the commit cycle syncs the version directory, each
// directory holding a file of the put, and every directory between them
// (a nested partition directory created by another put may not be synced
// into its parent yet: found reading fsys.Local's makeDir while building
// the power-loss model).
func TestStagedDirs(t *testing.T) {
	p := profile{keys: []string{"a", "b"}, dir: "a/b"}
	cases := []struct {
		name  string
		files []string
		want  []string
	}{
		{"unpartitioned", []string{"v3/0.parquet"}, []string{"a/b/v3"}},
		{"one level", []string{"v3/k=1/0.parquet", "v3/k=2/0.parquet", "v3/k=1/1.parquet"}, []string{"a/b/v3", "a/b/v3/k=1", "a/b/v3/k=2"}},
		{"two levels", []string{"v3/k=1/j=x/0.parquet", "v3/k=1/j=y/0.parquet", "v3/k=2/j=x/0.parquet"},
			[]string{"a/b/v3", "a/b/v3/k=1/j=x", "a/b/v3/k=1", "a/b/v3/k=1/j=y", "a/b/v3/k=2/j=x", "a/b/v3/k=2"}},
		{"no files", nil, []string{"a/b/v3"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := &staged{p: p, version: 3}
			for _, f := range c.files {
				st.files = append(st.files, FileRecord{Path: f})
			}
			got := st.stagedDirs()
			if !slices.Equal(got, c.want) {
				t.Fatalf("got %q, want %q", got, c.want)
			}
		})
	}
}
