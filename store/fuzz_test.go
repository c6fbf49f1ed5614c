package store

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Fuzz targets for the parsers of on-disk files (manifest.json,
// .<i>.commit.json, .version.json): a data dir is input too — written by
// pyrosome, by older versions, by hand, or damaged. Whatever the bytes, the
// parsers must not panic, and what they accept must satisfy what readers
// rely on. Seeds: store/testdata/fuzz/<FuzzName>/. Run with
// reliability/fuzz.sh (FUZZTIME per target).

// FuzzParseManifest: any bytes either give a version ≥ 0 whose encoding
// parses back to the same version, or a CorruptionError that names the
// manifest by its data-dir-relative path.
func FuzzParseManifest(f *testing.F) {
	f.Add(encodeManifest(0))
	f.Add(encodeManifest(12))
	f.Add([]byte(`{"latest_data_dir": "v1"}`))
	f.Add([]byte(`{"latest_data_dir": "v-1"}`))
	f.Add([]byte(`{"latest_data_dir": "v99999999999999999999"}`))
	f.Add([]byte(`{"latest_data_dir": "../v1"}`))
	f.Add([]byte(`{"latest_data_dir": 1}`))
	f.Add([]byte(``))
	p := profile{keys: []string{"sales", "orders"}, dir: "sales/orders"}
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseManifest(b, p)
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) {
				t.Fatalf("error is not a CorruptionError: %v", err)
			}
			if ce.Path != "sales/orders/"+manifestName {
				t.Fatalf("corruption path %q", ce.Path)
			}
			return
		}
		if n < 0 {
			t.Fatalf("negative version %d from %q", n, b)
		}
		again, err := parseManifest(encodeManifest(n), p)
		if err != nil || again != n {
			t.Fatalf("round trip of v%d: %d, %v", n, again, err)
		}
	})
}

// FuzzParseCommitRecord: an accepted record has a v<N> version, a
// non-negative index, well-formed file entries whose rows add up, and
// survives a marshal/parse round trip.
func FuzzParseCommitRecord(f *testing.F) {
	good := CommitRecord{Path: "sales/orders", Keys: []string{"sales", "orders"}, Version: "v1", Index: 2, Mode: ModeAppend,
		Format: FormatParquet, Rows: 3, SchemaVersion: "1.2.0",
		Files:     []FileRecord{{Path: "v1/2.parquet", Rows: 3, Bytes: 10, SHA256: strings.Repeat("ab", 32)}},
		Committed: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Writer: "w", RequestID: "r1", Metadata: json.RawMessage(`{"run":1}`)}
	b, _ := json.MarshalIndent(good, "", "  ")
	f.Add(b)
	f.Add([]byte(`{"version":"v0","index":0,"rows":0,"files":[]}`))
	f.Add([]byte(`{"version":"v0","index":-1,"rows":0}`))
	f.Add([]byte(`{"version":"v0","index":0,"rows":1,"files":[{"path":"../../etc/passwd","rows":1,"sha256":"` + strings.Repeat("0", 64) + `"}]}`))
	f.Add([]byte(`{"version":"v0","rows":-5,"files":[{"path":"x","rows":-5,"sha256":"` + strings.Repeat("0", 64) + `"}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCommitRecord(b)
		if err != nil {
			return
		}
		if _, ok := parseVersionDir(c.Version); !ok {
			t.Fatalf("accepted version %q", c.Version)
		}
		if c.Index < 0 {
			t.Fatalf("accepted index %d", c.Index)
		}
		var sum int64
		for _, fr := range c.Files {
			if fr.Path == "" || len(fr.SHA256) != 64 || fr.Rows < 0 {
				t.Fatalf("accepted file entry %+v", fr)
			}
			sum += fr.Rows
		}
		if sum != c.Rows {
			t.Fatalf("rows %d, files %d", c.Rows, sum)
		}
		out, err := json.Marshal(c)
		if err != nil {
			return // e.g. metadata that is valid for the decoder only
		}
		again, err := ParseCommitRecord(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if again.Version != c.Version || again.Index != c.Index || again.Rows != c.Rows || len(again.Files) != len(c.Files) {
			t.Fatalf("round trip: %+v != %+v", again, c)
		}
	})
}

// FuzzParseVersionInfo: an accepted .version.json has a known format, a
// schema that decodes, and partition columns that are in the schema; the
// JSON and the embedded IPC schema message are both attacker-controlled.
func FuzzParseVersionInfo(f *testing.F) {
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	vi := newVersionInfo(3, FormatParquet, sc, []string{"region"}, "1.2.0", time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), "w")
	b, _ := json.MarshalIndent(vi, "", "  ")
	f.Add(b)
	vi.PartitionBy = []string{"nope"}
	b, _ = json.Marshal(vi)
	f.Add(b)
	vi.Schema = base64.StdEncoding.EncodeToString([]byte("\xff\xff\xff\xff\x10\x00\x00\x00garbage"))
	b, _ = json.Marshal(vi)
	f.Add(b)
	f.Add([]byte(`{"format":"csv","schema":""}`))
	f.Add([]byte(`{"format":"xlsx"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		vi, sc, err := parseVersionInfo(b)
		if err != nil {
			return
		}
		if _, err := parseFormat(string(vi.Format)); err != nil {
			t.Fatalf("accepted format %q", vi.Format)
		}
		if sc == nil {
			t.Fatal("accepted without a schema")
		}
		for _, c := range vi.PartitionBy {
			if len(sc.FieldIndices(c)) != 1 {
				t.Fatalf("accepted partition column %q not in %s", c, sc)
			}
		}
		_ = encodeSchema(sc) // what a reader does next with it
	})
}
