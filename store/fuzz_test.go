package store

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/fsys"
)

// Fuzz targets for every parser of bytes that come from outside: keys
// (from clients), and the files of a data dir (manifest.json, commit log
// segments and their records, legacy .<i>.commit.json records,
// .version.json) — a data dir is input too: written by pyrosome, by older
// versions, by hand, or damaged. Whatever the bytes, the parsers must not
// panic, and what they accept must satisfy what readers rely on. Seeds:
// store/testdata/fuzz/<FuzzName>/. Run with reliability/fuzz.sh
// (FUZZTIME per target).

// FuzzParseKeys: accepted keys name a directory strictly inside the data
// dir that the storage accepts, never a name the layout uses itself, and
// the canonical path parses back to the same keys.
func FuzzParseKeys(f *testing.F) {
	for _, s := range [][2]string{
		{"sales/orders", ""}, {"sales", "orders"}, {"..", "x"}, {"a//b", ""}, {"v1", ""}, {"V01", ""},
		{"a", "manifest.json"}, {"3.parquet", ""}, {".log", ""}, {"a=b", ""}, {"é/ü", ""}, {"a\\b", ""},
		{"a\x00", ""}, {strings.Repeat("k", 300), ""}, {"a/", "b"}, {"/a", ""}, {"x.parquet", "v1a"},
		// Invisible characters (red team round 24's y03).
		{"sales/or\u200bders", ""}, {"sales", "orders\ufeff"}, {"a\u2028b", ""}, {"\u00ad", ""},
		{"\U0001F469\u200D\U0001F4BB", ""}, {"\u200d\U0001F4BB", ""}, {"\u2764\ufe0f\u200d\U0001F525", ""},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		parts := []string{a}
		if b != "" {
			parts = append(parts, b)
		}
		keys, err := ParseKeys(parts...)
		if err != nil {
			if !errors.Is(err, ErrInvalidKey) {
				t.Fatalf("error is not ErrInvalidKey: %v", err)
			}
			return
		}
		if err := ValidateKeys(keys); err != nil {
			t.Fatalf("ParseKeys accepted what ValidateKeys refuses: %v", err)
		}
		joined := ProfilePath(keys)
		if path.Join(keys...) != joined || path.Clean(joined) != joined || strings.HasPrefix(joined, "../") || joined == ".." {
			t.Fatalf("keys %q join to %q", keys, joined)
		}
		for _, name := range []string{joined, joined + "/" + manifestName, joined + "/" + lockName, joined + "/v0/0.parquet"} {
			if !fsys.ValidName(name) {
				t.Fatalf("keys %q make the storage name %q, which the storage refuses", keys, name)
			}
		}
		for _, k := range keys {
			for i, r := range k {
				if isInvisible(r) && !(r == zeroWidthJoiner && joinsEmoji(k, i)) && !presentsSymbol(k, i, r) {
					t.Fatalf("accepted the invisible character %U in %q", r, k)
				}
			}
			if strings.HasPrefix(k, ".") || reservedKeyRe.MatchString(k) {
				t.Fatalf("accepted a layout name %q", k)
			}
			if _, ok := parseVersionDir(k); ok {
				t.Fatalf("accepted a version directory name %q", k)
			}
			if _, _, ok := parseDataFile(k); ok {
				t.Fatalf("accepted a data file name %q", k)
			}
		}
		again, err := ParseKeys(joined)
		if err != nil || strings.Join(again, "\x00") != strings.Join(keys, "\x00") {
			t.Fatalf("%q parses back to %q, %v", joined, again, err)
		}
	})
}

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

// checkAcceptedRecord asserts what readers rely on in a record the parser
// accepted.
func checkAcceptedRecord(t *testing.T, c *CommitRecord, in []byte) {
	t.Helper()
	if _, ok := parseVersionDir(c.Version); !ok {
		t.Fatalf("accepted version %q", c.Version)
	}
	if c.Index < 0 || c.Seq < 0 {
		t.Fatalf("accepted index %d seq %d", c.Index, c.Seq)
	}
	if c.Prev != "" && len(c.Prev) != 64 {
		t.Fatalf("accepted prev %q", c.Prev)
	}
	switch c.Mode {
	case ModeAppend, ModeWrite, ModeRetire:
	default:
		t.Fatalf("accepted mode %q", c.Mode)
	}
	var sum int64
	for _, fr := range c.Files {
		if fr.Path == "" || len(fr.SHA256) != 64 || fr.Rows < 0 || fr.Bytes < 0 {
			t.Fatalf("accepted file entry %+v", fr)
		}
		// Readers open profile-dir/Path: it must be a data file of the
		// record's own version, never a name elsewhere in the data dir.
		if !strings.HasPrefix(fr.Path, c.Version+"/") || path.Clean(fr.Path) != fr.Path || strings.Contains(fr.Path, "/../") || !dataFileRe.MatchString(path.Base(fr.Path)) {
			t.Fatalf("accepted a file path %q outside version %s (or not a data file)", fr.Path, c.Version)
		}
		sum += fr.Rows
	}
	if sum != c.Rows {
		t.Fatalf("rows %d, files %d", c.Rows, sum)
	}
	if !bytes.Equal(c.Line(), bytes.TrimRight(in, "\n")) {
		t.Fatalf("Line() %q is not the bytes parsed %q", c.Line(), in)
	}
}

// FuzzParseCommitRecord: an accepted record (a log line or a legacy
// .<i>.commit.json) has a v<N> version, a non-negative index and seq, a
// known mode, well-formed file entries inside its version whose rows add
// up, keeps its exact bytes, and survives a marshal/parse round trip.
func FuzzParseCommitRecord(f *testing.F) {
	good := CommitRecord{Seq: 7, Prev: strings.Repeat("cd", 32), Path: "sales/orders", Keys: []string{"sales", "orders"}, Version: "v1", Index: 2, Mode: ModeAppend,
		Format: FormatParquet, Rows: 3, SchemaVersion: "1.2.0",
		Files:     []FileRecord{{Path: "v1/2.parquet", Rows: 3, Bytes: 10, SHA256: strings.Repeat("ab", 32)}},
		Committed: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), Writer: "w", RequestID: "r1", Metadata: json.RawMessage(`{"run":1}`)}
	b, _ := json.Marshal(good)
	f.Add(b)
	b, _ = json.MarshalIndent(good, "", "  ")
	f.Add(b) // a legacy record
	f.Add([]byte(`{"version":"v0","index":0,"mode":"write","rows":0,"files":[]}`))
	f.Add([]byte(`{"version":"v0","index":-1,"mode":"write","rows":0}`))
	f.Add([]byte(`{"seq":-1,"version":"v0","mode":"retire","rows":0}`))
	f.Add([]byte(`{"version":"v0","index":0,"mode":"append","rows":1,"files":[{"path":"../../etc/passwd","rows":1,"sha256":"` + strings.Repeat("0", 64) + `"}]}`))
	f.Add([]byte(`{"version":"v0","mode":"write","rows":-5,"files":[{"path":"x","rows":-5,"sha256":"` + strings.Repeat("0", 64) + `"}]}`))
	f.Add([]byte(`{"version":"v0","mode":"write","rows":0} {"x":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCommitRecord(b)
		if err != nil {
			return
		}
		checkAcceptedRecord(t, c, b)
		out, err := json.Marshal(c)
		if err != nil {
			return // e.g. metadata that is valid for the decoder only
		}
		again, err := ParseCommitRecord(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if again.Seq != c.Seq || again.Prev != c.Prev || again.Version != c.Version || again.Index != c.Index || again.Rows != c.Rows || len(again.Files) != len(c.Files) || again.Mode != c.Mode {
			t.Fatalf("round trip: %+v != %+v", again, c)
		}
	})
}

// FuzzParseSegment: an accepted segment holds one record per line,
// numbered from the segment's name on, each keeping its exact bytes;
// anything else is a CorruptionError naming the segment.
func FuzzParseSegment(f *testing.F) {
	rec := func(seq int64, prev string) []byte {
		c := &CommitRecord{Seq: seq, Prev: prev, Path: "p", Keys: []string{"p"}, Version: "v0", Index: int(seq - 1), Mode: ModeAppend, Format: FormatParquet,
			Rows: 1, Files: []FileRecord{{Path: "v0/0.parquet", Rows: 1, Bytes: 5, SHA256: strings.Repeat("0", 64)}}, Committed: time.Unix(0, 0).UTC(), Writer: "w"}
		if err := c.encodeLine(nil); err != nil {
			f.Fatal(err)
		}
		return c.line
	}
	one := rec(3, strings.Repeat("a", 64))
	two := rec(4, strings.Repeat("b", 64))
	f.Add(append(append([]byte(nil), one...), '\n'), int64(3))
	f.Add([]byte(string(one)+"\n"+string(two)+"\n"), int64(3))
	f.Add([]byte(string(one)+"\n"+string(two)+"\n"), int64(4))
	f.Add([]byte(string(one)+"\n\n"), int64(3))
	f.Add(one, int64(3))
	f.Add([]byte("\n"), int64(1))
	f.Add([]byte{}, int64(1))
	f.Fuzz(func(t *testing.T, b []byte, first int64) {
		const name = "p/.log/00000000000000000003.ndjson"
		recs, err := parseSegment(b, first, name, "p")
		if err != nil {
			var ce *CorruptionError
			if !errors.As(err, &ce) || ce.Path != name {
				t.Fatalf("error is not a CorruptionError naming the segment: %v", err)
			}
			return
		}
		lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
		if len(recs) != len(lines) || len(recs) == 0 {
			t.Fatalf("%d records from %d lines", len(recs), len(lines))
		}
		for i, r := range recs {
			if r.Seq != first+int64(i) {
				t.Fatalf("record %d has seq %d, want %d", i, r.Seq, first+int64(i))
			}
			checkAcceptedRecord(t, r, lines[i])
		}
		// A view built from them does not panic and ends where they do.
		lv := newLogView()
		lv.add(recs)
		if lv.head != recs[len(recs)-1].Seq || lv.headHash != recs[len(recs)-1].Hash() {
			t.Fatalf("view head %d %s", lv.head, lv.headHash)
		}
	})
}

// FuzzLogOnDisk: whatever bytes a segment and .log/HEAD hold, Inspect,
// Snapshot and Lineage do not panic, and Inspect never calls a log intact
// that is not one unbroken hash chain ending where HEAD says.
func FuzzLogOnDisk(f *testing.F) {
	seed := func() (seg1, seg2, head []byte) {
		dir := f.TempDir()
		s, err := Open(dir)
		if err != nil {
			f.Fatal(err)
		}
		for _, m := range []Mode{ModeWrite, ModeAppend} {
			rdr := ids(1)
			if _, err := s.Put(context.Background(), []string{"p"}, rdr, PutOptions{Mode: m}); err != nil {
				f.Fatal(err)
			}
			rdr.Release()
		}
		seg1, _ = os.ReadFile(filepath.Join(dir, "p", logDir, segmentName(1)))
		seg2, _ = os.ReadFile(filepath.Join(dir, "p", logDir, segmentName(2)))
		head, _ = os.ReadFile(filepath.Join(dir, "p", logDir, headName))
		return
	}
	s1, s2, h := seed()
	f.Add(s2, h)
	f.Add(s1, h)
	f.Add(append(append([]byte(nil), s2...), s2...), h)
	f.Add(bytes.Replace(s2, []byte(`"rows":1`), []byte(`"rows":2`), 1), h)
	f.Add(s2, []byte(`{"seq":3,"hash":"x"}`))
	f.Add([]byte("{}\n"), []byte(`{`))
	f.Fuzz(func(t *testing.T, seg2, head []byte) {
		dir := t.TempDir()
		pdir := filepath.Join(dir, "p")
		writeFile(t, filepath.Join(pdir, manifestName), string(encodeManifest(0)), 0)
		writeFile(t, filepath.Join(pdir, logDir, segmentName(1)), string(s1), 0)
		writeFile(t, filepath.Join(pdir, logDir, segmentName(2)), string(seg2), 0)
		writeFile(t, filepath.Join(pdir, logDir, headName), string(head), 0)
		s, err := Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close() // a store holds descriptors: fuzzing ran out of them
		ctx := context.Background()
		in, err := s.Inspect(ctx, []string{"p"})
		if err == nil && len(in.LogProblems) == 0 {
			// Intact: one chain from record 1, ending at HEAD.
			var hd logHead
			if json.Unmarshal(head, &hd) != nil {
				t.Fatalf("intact with an unreadable HEAD %q", head)
			}
			prev := ""
			for i, r := range in.Log {
				if r.Seq != int64(i+1) || r.Prev != prev {
					t.Fatalf("intact, but record %d has seq %d prev %.12s (want %.12s)", i, r.Seq, r.Prev, prev)
				}
				prev = r.Hash()
			}
			if n := len(in.Log); n == 0 || hd.Seq != in.Log[n-1].Seq || hd.Hash != prev {
				t.Fatalf("intact, but HEAD %+v is not the last record (%d records)", hd, n)
			}
		}
		_, _ = s.Snapshot(ctx, []string{"p"}, SnapshotOptions{Version: Latest})
		_ = s.Lineage(ctx, []string{"p"}, func(*CommitRecord) error { return nil })
	})
}

// FuzzVerifySignature: a record line that verifies with the key carries
// exactly the content the key signed; any change to it fails.
func FuzzVerifySignature(f *testing.F) {
	seedKey := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	priv := ed25519.NewKeyFromSeed(seedKey)
	pub := priv.Public().(ed25519.PublicKey)
	c := &CommitRecord{Seq: 1, Path: "p", Keys: []string{"p"}, Version: "v0", Mode: ModeWrite, Format: FormatParquet,
		Rows: 1, Files: []FileRecord{{Path: "v0/0.parquet", Rows: 1, Bytes: 5, SHA256: strings.Repeat("0", 64)}}, Committed: time.Unix(0, 0).UTC(), Writer: "w"}
	if err := c.encodeLine(priv); err != nil {
		f.Fatal(err)
	}
	signed := signedPart(c)
	f.Add(c.line)
	f.Add(bytes.Replace(c.line, []byte(`"rows":1`), []byte(`"rows":1 `), 1))
	f.Add(bytes.Replace(c.line, []byte(`"writer":"w"`), []byte(`"writer":"x"`), 1))
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := parseRecord(b)
		if err != nil {
			return
		}
		if r.VerifySignature(pub) == nil && !bytes.Equal(signedPart(r), signed) {
			t.Fatalf("a changed record verifies: %s", b)
		}
	})
}

// signedPart is the line without its trailing "sig" field.
func signedPart(c *CommitRecord) []byte {
	suffix := `,"sig":"` + c.Sig + `"}`
	if !bytes.HasSuffix(c.line, []byte(suffix)) {
		return nil
	}
	return append(append([]byte(nil), c.line[:len(c.line)-len(suffix)]...), '}')
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

// TestForgedRecordCannotReadOutsideItsVersion: a record (a log line or a
// legacy .<i>.commit.json, which anyone with write access can plant)
// naming a file outside its own version must not make readers serve
// another profile's data. Readers open profile-dir/Path, cleaned: "../"
// climbs out of the profile.
func TestForgedRecordCannotReadOutsideItsVersion(t *testing.T) {
	s, dir := newTestStore(t)
	ctx := context.Background()
	put(t, s, ModeWrite, []string{"secret"}, ids(42), PutOptions{})
	put(t, s, ModeWrite, []string{"public"}, ids(1), PutOptions{})
	sn, err := s.Snapshot(ctx, []string{"secret"}, SnapshotOptions{Version: Latest})
	if err != nil {
		t.Fatal(err)
	}
	f := sn.Files[0]
	forged := CommitRecord{Path: "public", Keys: []string{"public"}, Version: "v0", Index: 1, Mode: ModeAppend, Format: FormatParquet, Rows: f.Rows,
		Files: []FileRecord{{Path: "v0/../../secret/" + f.Path, Rows: f.Rows, Bytes: f.Bytes, SHA256: f.SHA256}}, Committed: time.Now().UTC(), Writer: "mallory"}
	b, _ := json.Marshal(forged)
	writeFile(t, filepath.Join(dir, "public", "v0", legacyRecordName(1)), string(b), 0)
	fresh, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := fresh.Read(ctx, []string{"public"}, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
	if err != nil {
		return // refused: fine
	}
	defer rdr.Release()
	for rdr.Next() {
		for _, v := range rdr.RecordBatch().Column(0).(interface{ Int64Values() []int64 }).Int64Values() {
			if v == 42 {
				t.Fatalf("a forged record made a read of profile public serve profile secret's row")
			}
		}
	}
}
