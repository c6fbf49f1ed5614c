package store

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The fixture testdata/pyrosome-0.1.12 was written by pyrosome itself
// (testdata/gen_pyrosome_fixture.py); EXPECTED.json is what pyarrow and
// polars read from it. It stays forever: Quiver must keep serving it.
const pyrosomeFixture = "../testdata/pyrosome-0.1.12"

type fixtureProfile struct {
	Keys          []string `json:"keys"`
	Format        string   `json:"format"`
	LatestVersion string   `json:"latest_version"`
	RowCount      int      `json:"row_count"`
	Columns       []struct {
		Name       string `json:"name"`
		Type       string `json:"type"`
		PolarsType string `json:"polars_type"`
	} `json:"columns"`
	Rows []map[string]any `json:"rows"`
}

// copyTree copies a fixture so tests may write into it.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		out := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(out, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(out, b, 0o444)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// arrowTypeName maps pyarrow's type names (parquet) and polars' (CSV, as
// pyrosome's CsvDal infers them) to arrow-go's.
func arrowTypeName(pyarrow, polars, format string) string {
	if format == "csv" {
		return map[string]string{"String": "utf8", "Int64": "int64", "Float64": "float64", "Boolean": "bool"}[polars]
	}
	if m := map[string]string{"large_string": "large_utf8", "string": "utf8", "double": "float64", "date32[day]": "date32"}[pyarrow]; m != "" {
		return m
	}
	return pyarrow
}

// cellText renders a cell as EXPECTED.json writes it.
func cellText(a arrow.Array, i int) string {
	if a.IsNull(i) {
		return "<nil>"
	}
	switch c := a.(type) {
	case *array.Timestamp:
		tt := c.DataType().(*arrow.TimestampType)
		ts := c.Value(i).ToTime(tt.Unit)
		layout := "2006-01-02T15:04:05" // Python's isoformat: micros only when non-zero
		if ts.Nanosecond() != 0 {
			layout += ".000000"
		}
		if tt.TimeZone != "" {
			layout += "-07:00"
		}
		return ts.Format(layout)
	case *array.Float64:
		return strconv.FormatFloat(c.Value(i), 'g', -1, 64)
	}
	return a.ValueStr(i)
}

func jsonText(v any) string {
	switch x := v.(type) {
	case nil:
		return "<nil>"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return fmt.Sprint(v)
}

func TestServesPyrosomeFixture(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(pyrosomeFixture, "EXPECTED.json"))
	if err != nil {
		t.Fatal(err)
	}
	var exp struct {
		Profiles map[string]fixtureProfile `json:"profiles"`
	}
	if err := json.Unmarshal(raw, &exp); err != nil {
		t.Fatal(err)
	}
	s, dir := newTestStore(t)
	copyTree(t, pyrosomeFixture, dir)
	var listed []string
	if err := s.ListProfiles(context.Background(), nil, func(p ProfileSummary) error {
		listed = append(listed, fmt.Sprintf("%s@v%d", p.Path(), p.Latest))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(listed, " "); got != "events@v0 exports/daily@v0 sales/orders@v1" {
		t.Fatalf("listed %s", got)
	}
	for name, fp := range exp.Profiles {
		t.Run(name, func(t *testing.T) {
			rdr, err := s.Read(context.Background(), []string{name}, latest)
			if err != nil {
				t.Fatal(err)
			}
			defer rdr.Release()
			sc := rdr.Schema()
			if sc.NumFields() != len(fp.Columns) {
				t.Fatalf("schema %s", sc)
			}
			for i, c := range fp.Columns {
				f := sc.Field(i)
				if want := arrowTypeName(c.Type, c.PolarsType, fp.Format); f.Name != c.Name || f.Type.String() != want {
					t.Errorf("column %d: %s %s, want %s %s", i, f.Name, f.Type, c.Name, want)
				}
			}
			row := 0
			for rdr.Next() {
				rec := rdr.RecordBatch()
				for i := 0; i < int(rec.NumRows()); i++ {
					for j, c := range fp.Columns {
						got, want := cellText(rec.Column(j), i), jsonText(fp.Rows[row][c.Name])
						if got != want {
							t.Errorf("row %d %s: %s, want %s", row, c.Name, got, want)
						}
					}
					row++
				}
			}
			if rdr.Err() != nil || row != fp.RowCount {
				t.Fatalf("rows %d, want %d: %v", row, fp.RowCount, rdr.Err())
			}
		})
	}
	// Quiver appends into a version pyrosome created: next index, a claim,
	// a commit record; pyrosome's own files stay unrecorded but visible.
	events := exp.Profiles["events"]
	seq := arrow.NewSchema([]arrow.Field{
		{Name: "kind", Type: arrow.BinaryTypes.String, Nullable: true}, // string widens to large_string
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "seq", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, // int32 widens to int64
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	}, nil)
	c := put(t, s, ModeAppend, events.Keys, fromJSON(t, seq, `[{"kind":"quiver","ok":true,"seq":99,"ts":"2024-03-02T00:00:00"}]`), PutOptions{})
	if c.Version != "v0" || c.Index != 3 {
		t.Fatalf("append into pyrosome version: %+v", c)
	}
	for _, f := range []string{".3.parquet.claim", "3.parquet", ".3.commit.json"} {
		if _, err := os.Stat(filepath.Join(dir, "events", "v0", f)); err != nil {
			t.Error(err)
		}
	}
	sn, err := s.Snapshot(context.Background(), events.Keys, SnapshotOptions{Version: -1})
	if err != nil || sn.Rows() != int64(events.RowCount+1) || len(sn.Files) != 4 {
		t.Fatalf("after append: %v rows, %v", sn.Rows(), err)
	}
}
