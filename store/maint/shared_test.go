package maint

import (
	"strings"
	"testing"

	"github.com/quiverdb/quiver/store"
)

// TestVerifyShared: the records of appends that share a file must agree
// on it and cover its rows exactly once; verify names the file otherwise.
func TestVerifyShared(t *testing.T) {
	sha := strings.Repeat("a", 64)
	other := strings.Repeat("b", 64)
	slice := func(off, rows, of int64) store.FileRecord {
		return store.FileRecord{Path: "v0/3.parquet", Rows: rows, Bytes: 100, SHA256: sha, Offset: off, FileRows: of}
	}
	cases := []struct {
		name  string
		files []store.FileRecord
		bad   bool
	}{
		{"tiles", []store.FileRecord{slice(0, 2, 5), slice(2, 3, 5)}, false},
		{"out of record order", []store.FileRecord{slice(2, 3, 5), slice(0, 2, 5)}, false},
		{"empty appends among them", []store.FileRecord{slice(0, 0, 5), slice(0, 2, 5), slice(2, 0, 5), slice(2, 3, 5)}, false},
		{"gap", []store.FileRecord{slice(0, 2, 6), slice(3, 3, 6)}, true},
		{"overlap", []store.FileRecord{slice(0, 3, 5), slice(2, 3, 5)}, true},
		{"short of the file", []store.FileRecord{slice(0, 2, 5), slice(2, 2, 5)}, true},
		{"one slice missing", []store.FileRecord{slice(2, 3, 5)}, true},
		{"file rows disagree", []store.FileRecord{slice(0, 2, 5), slice(2, 3, 6)}, true},
		{"hash disagrees", []store.FileRecord{slice(0, 2, 5), func() store.FileRecord { f := slice(2, 3, 5); f.SHA256 = other; return f }()}, true},
		{"size disagrees", []store.FileRecord{slice(0, 2, 5), func() store.FileRecord { f := slice(2, 3, 5); f.Bytes = 99; return f }()}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			vs := &store.VersionState{}
			for _, f := range c.files {
				vs.Records = append(vs.Records, &store.CommitRecord{Mode: store.ModeAppend, Rows: f.Rows, Files: []store.FileRecord{f}})
			}
			// A file of one record's own is never checked here.
			vs.Records = append(vs.Records, &store.CommitRecord{Mode: store.ModeAppend, Rows: 1,
				Files: []store.FileRecord{{Path: "v0/9.parquet", Rows: 1, Bytes: 10, SHA256: other}}})
			var rep VerifyReport
			verifyShared("p", vs, &rep)
			if got := len(rep.Problems) > 0; got != c.bad {
				t.Fatalf("problems %v, want bad=%v", rep.Problems, c.bad)
			}
			if c.bad && (rep.Problems[0].Kind != ProblemChain || rep.Problems[0].Path != "p/v0/3.parquet") {
				t.Fatalf("problem %+v", rep.Problems[0])
			}
		})
	}
}
