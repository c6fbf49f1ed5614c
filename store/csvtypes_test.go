package store

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

// TestCSVPinnedTypes: a read of pinned CSV files with the types of a plan
// (SnapshotOptions.CSVTypes) streams those types after files pyrosome
// added changed what the version's files give (int64 to float64, then to
// string): the pinned files are inferred again and fit them. Types the
// pinned files do not fit are ErrInvalidArgument, however the version's
// current types would take them.
func TestCSVPinnedTypes(t *testing.T) {
	s, dir := newTestStore(t)
	keys := []string{"csv", "pinned"}
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	put(t, s, ModeWrite, keys, fromJSON(t, sc, `[{"id":0,"v":1},{"id":1,"v":-2}]`), PutOptions{Format: "csv"})
	sn, err := s.Snapshot(context.Background(), keys, SnapshotOptions{Version: Latest})
	if err != nil {
		t.Fatal(err)
	}
	first := sn.Files[0].Path
	planned := map[string]string{"id": "int64", "v": "int64"}
	vdir := filepath.Join(append(append([]string{dir}, keys...), filepath.Dir(first))...)
	for i, tc := range []struct {
		add    string   // a file pyrosome adds
		now    string   // v's type then
		pinned []string // files read with the planned types
		want   string   // the rows, or a part of the error
	}{
		{add: "id,v\n2,1.5\n", now: "float64", pinned: []string{first}, want: `[{"id":0,"v":1},{"id":1,"v":-2}]`},
		{add: "id,v\n3,x\n", now: "utf8", pinned: []string{first}, want: `[{"id":0,"v":1},{"id":1,"v":-2}]`},
		{pinned: []string{first, "v0/1.csv"}, want: `column "v" does not read as int64: its values make it float64`},
		{pinned: []string{"v0/2.csv"}, want: `column "v" does not read as int64: its values make it string`},
	} {
		if tc.add != "" {
			if err := os.WriteFile(filepath.Join(vdir, []string{"1.csv", "2.csv"}[i]), []byte(tc.add), 0o644); err != nil {
				t.Fatal(err)
			}
			latest, _ := readAll(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
			if got := latest.Field(1).Type.String(); got != tc.now {
				t.Fatalf("%d: v reads as %s, want %s", i, got, tc.now)
			}
		}
		o := ReadOptions{SnapshotOptions: SnapshotOptions{Version: sn.Version, Files: tc.pinned, CSVTypes: planned}}
		if !strings.HasPrefix(tc.want, "[") {
			if _, err := s.Read(context.Background(), keys, o); !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%d: %v, want ErrInvalidArgument with %q", i, err, tc.want)
			}
			continue
		}
		got, rows := readAll(t, s, keys, o)
		if got.NumFields() != 2 || got.Field(1).Type.ID() != arrow.INT64 || rows != tc.want {
			t.Fatalf("%d: %s %s, want v int64 and %s", i, got, rows, tc.want)
		}
	}
}
