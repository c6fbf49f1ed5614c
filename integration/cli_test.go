package integration

// End-to-end tests of the client and admin subcommands of the quiver
// binary against a real `quiver serve` (and, offline, a data dir).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	arrowcsv "github.com/apache/arrow-go/v18/arrow/csv"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/creack/pty"
)

// cliResult is what one run of the binary did.
type cliResult struct {
	stdout, stderr string
	code           int
}

// cli runs the quiver binary with QUIVER_SERVER pointing at s (when s is
// not nil), stdout and stderr to pipes.
func cli(t *testing.T, s *server, args ...string) cliResult {
	t.Helper()
	return cliEnv(t, s, nil, args...)
}

// cliEnv is cli with more environment (a storage's credentials).
func cliEnv(t *testing.T, s *server, env []string, args ...string) cliResult {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(append(os.Environ(), "QUIVER_TOKEN=", "NO_COLOR="), env...)
	if s != nil {
		cmd.Env = append(cmd.Env, "QUIVER_SERVER="+s.addr)
	} else {
		cmd.Env = append(cmd.Env, "QUIVER_SERVER=127.0.0.1:1") // nothing listens there
	}
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := cliResult{stdout: out.String(), stderr: errb.String()}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		t.Fatalf("run quiver %v: %v", args, err)
	}
	return r
}

// mustCLI runs the binary and fails the test unless it exits 0.
func mustCLI(t *testing.T, s *server, args ...string) cliResult {
	t.Helper()
	r := cli(t, s, args...)
	if r.code != 0 {
		t.Fatalf("quiver %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	return r
}

// failCLI runs the binary, expects exit code 1 and exactly one error line
// on stderr ("quiver: …", no gRPC or Go error chain), and returns it.
func failCLI(t *testing.T, s *server, args ...string) cliResult {
	t.Helper()
	r := cli(t, s, args...)
	if r.code != 1 {
		t.Fatalf("quiver %s: exit %d, want 1\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
	}
	lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.HasPrefix(last, "quiver: ") || strings.Contains(r.stderr, "rpc error") || strings.Contains(r.stderr, "desc =") ||
		strings.Contains(r.stderr, "goroutine ") {
		t.Fatalf("quiver %s: stderr is not one clear error line:\n%s", strings.Join(args, " "), r.stderr)
	}
	return r
}

// cliSchema is the table the round-trip tests put: every type each input
// format can carry exactly.
var cliSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true, Metadata: arrow.NewMetadata([]string{"doc"}, []string{"row id"})},
	{Name: "region", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "val", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "note", Type: arrow.BinaryTypes.String, Nullable: true},
}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"owner"}, []string{"cli tests"}); return &m }())

var cliRegions = []string{"eu", "us", "apac"}

// cliBatch makes n rows from start. The first val is a whole number, so
// CSV/NDJSON type inference must look past the first row.
func cliBatch(start, n int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, cliSchema)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(i)
		b.Field(1).(*array.StringBuilder).Append(cliRegions[i%int64(len(cliRegions))])
		b.Field(2).(*array.Float64Builder).Append(float64(i) * 0.5)
		b.Field(3).(*array.BooleanBuilder).Append(i%2 == 0)
		b.Field(4).(*array.StringBuilder).Append(fmt.Sprintf("note, \"%d\"", i)) // quoting in CSV
	}
	return b.NewRecordBatch()
}

// writeInput writes recs to path in the given format.
func writeInput(t *testing.T, path, format string, recs ...arrow.RecordBatch) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	sc := recs[0].Schema()
	switch format {
	case "parquet":
		w, err := pqarrow.NewFileWriter(sc, f, parquet.NewWriterProperties(parquet.WithMaxRowGroupLength(500)),
			pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil { // closes f too
			t.Fatal(err)
		}
		return
	case "arrow", "feather":
		w, err := ipc.NewFileWriter(f, ipc.WithSchema(sc))
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case "arrows":
		w := ipc.NewWriter(f, ipc.WithSchema(sc))
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	case "csv":
		w := arrowcsv.NewWriter(f, sc, arrowcsv.WithHeader(true), arrowcsv.WithNullWriter(""))
		for _, r := range recs {
			if err := w.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
	case "ndjson":
		bw := bufio.NewWriter(f)
		for _, r := range recs {
			for i := 0; i < int(r.NumRows()); i++ {
				b, err := json.Marshal(struct {
					ID     int64   `json:"id"`
					Region string  `json:"region"`
					Val    float64 `json:"val"`
					OK     bool    `json:"ok"`
					Note   string  `json:"note"`
				}{
					r.Column(0).(*array.Int64).Value(i), r.Column(1).(*array.String).Value(i),
					r.Column(2).(*array.Float64).Value(i), r.Column(3).(*array.Boolean).Value(i),
					r.Column(4).(*array.String).Value(i),
				})
				if err != nil {
					t.Fatal(err)
				}
				bw.Write(append(b, '\n'))
			}
		}
		if err := bw.Flush(); err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("format %s", format)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// readArrowFile reads an Arrow IPC file into one table.
func readArrowFile(t *testing.T, path string) arrow.Table {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewFileReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var recs []arrow.RecordBatch
	for i := 0; i < r.NumRecords(); i++ {
		rec, err := r.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		rec.Retain()
		defer rec.Release()
		recs = append(recs, rec)
	}
	tb := array.NewTableFromRecords(r.Schema(), recs)
	t.Cleanup(tb.Release)
	return tb
}

func readParquetFile(t *testing.T, path string) arrow.Table {
	t.Helper()
	pf, err := file.OpenParquetFile(path, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tb, err := fr.ReadTable(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tb.Release)
	return tb
}

func tableOf(t *testing.T, recs ...arrow.RecordBatch) arrow.Table {
	tb := array.NewTableFromRecords(recs[0].Schema(), recs)
	t.Cleanup(tb.Release)
	return tb
}

// sameTable compares column names, types and values; exact also compares
// nullability and schema- and field-level metadata.
func sameTable(t *testing.T, what string, want, got arrow.Table, exact bool) {
	t.Helper()
	if exact && !want.Schema().Equal(got.Schema()) {
		t.Fatalf("%s: schema\n%s\nwant\n%s", what, got.Schema(), want.Schema())
	}
	if exact && !want.Schema().Metadata().Equal(got.Schema().Metadata()) {
		t.Fatalf("%s: schema metadata %v, want %v", what, got.Schema().Metadata(), want.Schema().Metadata())
	}
	if want.NumCols() != got.NumCols() || want.NumRows() != got.NumRows() {
		t.Fatalf("%s: %d cols × %d rows, want %d × %d", what, got.NumCols(), got.NumRows(), want.NumCols(), want.NumRows())
	}
	for i := 0; i < int(want.NumCols()); i++ {
		wf, gf := want.Schema().Field(i), got.Schema().Field(i)
		if wf.Name != gf.Name || !arrow.TypeEqual(wf.Type, gf.Type) {
			t.Fatalf("%s: column %d is %s %s, want %s %s", what, i, gf.Name, gf.Type, wf.Name, wf.Type)
		}
		if !array.ChunkedEqual(want.Column(i).Data(), got.Column(i).Data()) {
			t.Fatalf("%s: column %s differs", what, wf.Name)
		}
	}
}

func TestCLIPutGetRoundTrip(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a, b := cliBatch(0, 1500), cliBatch(1500, 700) // more than inferRows, two batches
	defer a.Release()
	defer b.Release()
	want := tableOf(t, a, b)

	for _, tc := range []struct {
		format, ext string
		exact       bool // the format carries the Arrow schema with its metadata
	}{
		{"parquet", ".parquet", true},
		{"arrow", ".arrow", true},
		{"feather", ".feather", true},
		{"arrows", ".arrows", true},
		{"csv", ".csv", false},
		{"ndjson", ".ndjson", false},
	} {
		t.Run(tc.format, func(t *testing.T) {
			in := filepath.Join(dir, "in"+tc.ext)
			writeInput(t, in, tc.format, a, b)
			profile := "rt/" + tc.format
			r := mustCLI(t, s, "put", "--meta", "run=r1", "--schema-version", "1.0.0", profile, in)
			if !strings.Contains(r.stdout, "committed "+profile+" v0 index 0") || !strings.Contains(r.stdout, "2,200 rows") {
				t.Fatalf("put printed %q", r.stdout)
			}
			out := filepath.Join(dir, tc.format+"-out.arrow")
			mustCLI(t, s, "get", profile, "-o", out)
			sameTable(t, tc.format, want, readArrowFile(t, out), tc.exact)

			// The commit record carries the metadata and schema version.
			lin := mustCLI(t, s, "lineage", profile)
			var rec putResult
			if err := json.Unmarshal([]byte(strings.TrimSpace(lin.stdout)), &rec); err != nil {
				t.Fatalf("lineage %q: %v", lin.stdout, err)
			}
			if rec.SchemaVersion != "1.0.0" || !strings.Contains(string(rec.Metadata), `"run":"r1"`) || rec.RequestID == "" {
				t.Fatalf("commit record %+v", rec)
			}
		})
	}

	// Output formats: Parquet and CSV files, and CSV on a pipe.
	pq := filepath.Join(dir, "out.parquet")
	mustCLI(t, s, "get", "rt/parquet", "-o", pq)
	sameTable(t, "get -o .parquet", want, readParquetFile(t, pq), false)
	csvOut := filepath.Join(dir, "out.csv")
	mustCLI(t, s, "get", "rt/arrow", "-o", csvOut)
	wantCSV, err := os.ReadFile(filepath.Join(dir, "in.csv"))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := os.ReadFile(csvOut); !bytes.Equal(got, wantCSV) {
		t.Fatalf("get -o .csv differs from the CSV arrow writes:\n%.300s", got)
	}
	if r := mustCLI(t, s, "get", "rt/csv"); r.stdout != string(wantCSV) {
		t.Fatalf("get to a pipe is not the CSV:\n%.300s", r.stdout)
	}
}

func TestCLIPutSeveralFiles(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a, b := cliBatch(0, 10), cliBatch(10, 5)
	defer a.Release()
	defer b.Release()
	p1, p2 := filepath.Join(dir, "a.parquet"), filepath.Join(dir, "b.arrow")
	writeInput(t, p1, "parquet", a)
	writeInput(t, p2, "arrow", b)
	r := mustCLI(t, s, "put", "--json", "multi/x", p1, p2)
	var pr putResult
	if err := json.Unmarshal([]byte(r.stdout), &pr); err != nil {
		t.Fatalf("put --json: %q: %v", r.stdout, err)
	}
	if pr.Rows != 15 || pr.Index != 0 {
		t.Fatalf("one put of two files: %+v", pr)
	}

	// A file with other columns: a clear error, nothing committed.
	other := filepath.Join(dir, "other.csv")
	os.WriteFile(other, []byte("x,y\n1,2\n"), 0o644)
	e := failCLI(t, s, "put", "multi/x", p1, other)
	if !strings.Contains(e.stderr, "does not match") {
		t.Fatalf("mismatch error: %s", e.stderr)
	}
	v := mustCLI(t, s, "versions", "--json", "multi/x")
	if !strings.Contains(v.stdout, `"commits": 1`) {
		t.Fatalf("a failed put committed something: %s", v.stdout)
	}

	// The same request id twice writes once.
	mustCLI(t, s, "put", "--request-id", "job-1", "multi/x", p1)
	mustCLI(t, s, "put", "--request-id", "job-1", "multi/x", p1)
	if got := mustGet(t, s.client, "multi/x").rows; got != 25 {
		t.Fatalf("rows after a replayed put: %d, want 25", got)
	}
}

func TestCLIWhereColumns(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a := cliBatch(0, 30)
	defer a.Release()
	in := filepath.Join(dir, "in.parquet")
	writeInput(t, in, "parquet", a)
	mustCLI(t, s, "put", "--mode", "write", "--partition-by", "region", "part/x", in)

	out := filepath.Join(dir, "eu.arrow")
	mustCLI(t, s, "get", "part/x", "--where", "region=eu", "--columns", "id,val", "-o", out)
	tb := readArrowFile(t, out)
	if tb.NumCols() != 2 || tb.Schema().Field(0).Name != "id" || tb.Schema().Field(1).Name != "val" {
		t.Fatalf("--columns id,val gave %s", tb.Schema())
	}
	if tb.NumRows() != 10 {
		t.Fatalf("--where region=eu: %d rows, want 10", tb.NumRows())
	}
	for _, c := range tb.Column(0).Data().Chunks() {
		for _, id := range c.(*array.Int64).Int64Values() {
			if id%3 != 0 {
				t.Fatalf("row %d is not in eu", id)
			}
		}
	}
	// Two values of one column; CSV to the pipe.
	r := mustCLI(t, s, "get", "part/x", "--where", "region=eu", "--where", "region=us", "--columns", "region")
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	if lines[0] != "region" || len(lines) != 21 || strings.Contains(r.stdout, "apac") {
		t.Fatalf("--where eu,us: %q", r.stdout)
	}
	failCLI(t, s, "get", "part/x", "--where", "id=1") // not a partition column
	// Row filters (any column) and limits.
	r = mustCLI(t, s, "get", "part/x", "--where", "region = 'eu' and id > 10", "--where", "id < 25", "--columns", "id")
	if got := strings.Fields(r.stdout); strings.Join(got, ",") != "id,12,15,18,21,24" {
		t.Fatalf("--where expression: %q", r.stdout)
	}
	r = mustCLI(t, s, "get", "part/x", "--where", "id = 1 or id in (4, 7)", "--limit", "2", "--columns", "id")
	if got := strings.Fields(r.stdout); len(got) != 3 || got[0] != "id" {
		t.Fatalf("--limit 2: %q", r.stdout)
	}
	if f := failCLI(t, s, "get", "part/x", "--where", "nope > 1"); !strings.Contains(f.stderr, `"nope"`) {
		t.Fatalf("unknown filter column: %q", f.stderr)
	}
	failCLI(t, s, "get", "part/x", "--where", "id >")                 // malformed
	failCLI(t, s, "get", "part/x", "--where", "id = 'x'")             // wrong type
	failCLI(t, s, "get", "part/x", "--columns", "nope")               // unknown column
	failCLI(t, s, "get", "part/x", "--version", "v9")                 // no such version
	failCLI(t, s, "get", "part/x", "-o", filepath.Join(dir, "x.txt")) // unknown extension
	if _, err := os.Stat(filepath.Join(dir, "x.txt")); err == nil {
		t.Fatal("a failed get left its output file")
	}
}

func TestCLIVerifyFlippedByte(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a := cliBatch(0, 100)
	defer a.Release()
	in := filepath.Join(dir, "in.parquet")
	writeInput(t, in, "parquet", a)
	mustCLI(t, s, "put", "audit/x", in)
	mustCLI(t, s, "put", "audit/y", in)

	r := mustCLI(t, s, "verify")
	if !strings.HasPrefix(r.stdout, "ok: 2 files checked") {
		t.Fatalf("verify of a clean store: %q", r.stdout)
	}
	flipByte(t, filepath.Join(s.dataDir, "audit", "x", "v0", "0.parquet"))
	e := failCLI(t, s, "verify")
	if !strings.Contains(e.stdout, "mutated") || !strings.Contains(e.stdout, "audit/x/v0/0.parquet") {
		t.Fatalf("verify report:\n%s", e.stdout)
	}
	if strings.TrimSpace(e.stderr) != "quiver: verify found 1 problem" {
		t.Fatalf("verify stderr: %q", e.stderr)
	}
	j := failCLI(t, s, "verify", "--json", "audit")
	var rep struct {
		OK       bool `json:"ok"`
		Problems []struct{ Kind, Path string }
	}
	if err := json.Unmarshal([]byte(j.stdout), &rep); err != nil || rep.OK || len(rep.Problems) != 1 || rep.Problems[0].Kind != "mutated" {
		t.Fatalf("verify --json: %s (%v)", j.stdout, err)
	}
	// A prefix that leaves the mutated profile out is clean.
	mustCLI(t, s, "verify", "audit/y")
	// Sampled online: a rate of 1 re-hashes everything and finds the flip.
	if e := failCLI(t, s, "verify", "--sample", "1", "--seed", "3"); !strings.Contains(e.stdout, "mutated") {
		t.Fatalf("sampled verify:\n%s", e.stdout)
	}
	// Offline, the same.
	if r := cliEnv(t, nil, s.Storage.Env, append([]string{"verify", "--data-dir", s.Storage.DataDir}, s.Storage.Flags...)...); r.code != 1 || !strings.Contains(r.stdout, "mutated") {
		t.Fatalf("offline verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// flipByte inverts one byte in the middle of a file (its permissions may be
// read-only: committed files are).
func flipByte(t *testing.T, path string) {
	t.Helper()
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0xff
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestCLIAdminOnline(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a := cliBatch(0, 10)
	defer a.Release()
	in := filepath.Join(dir, "in.csv")
	writeInput(t, in, "csv", a)
	mustCLI(t, s, "put", "sales/orders", in)
	mustCLI(t, s, "put", "sales/orders", in)
	mustCLI(t, s, "put", "--mode", "write", "sales/orders", in)
	mustCLI(t, s, "put", "salesman/x", in)

	ls := mustCLI(t, s, "ls", "sales")
	if !regexp.MustCompile(`(?m)^sales/orders\s+v1\s+2\s+1\s+10\s`).MatchString(ls.stdout) || strings.Contains(ls.stdout, "salesman") {
		t.Fatalf("ls sales:\n%s", ls.stdout)
	}
	var rows []struct {
		Path       string    `json:"path"`
		Latest     string    `json:"latest"`
		Rows       int64     `json:"rows"`
		LastCommit time.Time `json:"last_commit"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, s, "ls", "--json").stdout), &rows); err != nil || len(rows) != 2 ||
		rows[0].Path != "sales/orders" || rows[0].Rows != 10 || rows[0].LastCommit.IsZero() {
		t.Fatalf("ls --json: %+v (%v)", rows, err)
	}
	v := mustCLI(t, s, "versions", "sales/orders")
	if !regexp.MustCompile(`(?m)^\*\s+v1\s`).MatchString(v.stdout) || !regexp.MustCompile(`(?m)^\s+v0\s+csv|parquet`).MatchString(v.stdout) {
		t.Fatalf("versions:\n%s", v.stdout)
	}
	sc := mustCLI(t, s, "schema", "sales/orders")
	if !regexp.MustCompile(`(?m)^val\s+float64`).MatchString(sc.stdout) {
		t.Fatalf("schema:\n%s", sc.stdout)
	}
	lin := mustCLI(t, s, "lineage", "sales/orders")
	if n := strings.Count(lin.stdout, "\n"); n != 3 || !strings.Contains(lin.stdout, `"index":1,"mode":"append"`) {
		t.Fatalf("lineage: %d lines, want 3:\n%s", n, lin.stdout)
	}
	gc := mustCLI(t, s, "gc", "sales/orders", "--keep", "1", "--grace", "0s")
	if !strings.Contains(gc.stdout, "removed v0") {
		t.Fatalf("gc: %s", gc.stdout)
	}
	c := mustCLI(t, s, "compact", "sales/orders")
	if !strings.Contains(c.stdout, "compacted into sales/orders v2") {
		t.Fatalf("compact: %s", c.stdout)
	}
	mustCLI(t, s, "sweep", "--older-than", "1h")
	bl := failCLI(t, s, "break-lock", "sales/orders")
	if !strings.Contains(bl.stderr, "not locked") {
		t.Fatalf("break-lock: %s", bl.stderr)
	}
	e := failCLI(t, s, "versions", "no/such")
	if !strings.Contains(e.stderr, "no/such") {
		t.Fatalf("versions of a missing profile: %s", e.stderr)
	}
}

func TestCLIOfflineAdmin(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a := cliBatch(0, 10)
	defer a.Release()
	in := filepath.Join(dir, "in.parquet")
	writeInput(t, in, "parquet", a)
	mustCLI(t, s, "put", "ops/x", in)
	mustCLI(t, s, "put", "--mode", "write", "--partition-by", "region", "ops/x", in)

	// Stop the server: the operator is on the box, the service is down.
	if err := s.Stop(20 * time.Second); err != nil {
		t.Fatalf("serve exit: %v", err)
	}
	e := failCLI(t, s, "ls")
	if !strings.Contains(e.stderr, "cannot reach a quiver server at "+s.addr) {
		t.Fatalf("ls with the server down: %s", e.stderr)
	}

	// Offline commands reach the data directory (or bucket) themselves.
	dd := append([]string{"--data-dir", s.Storage.DataDir}, s.Storage.Flags...)
	off := func(args ...string) cliResult {
		t.Helper()
		r := cliEnv(t, nil, s.Storage.Env, append(args, dd...)...)
		if r.code != 0 {
			t.Fatalf("quiver %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.stdout, r.stderr)
		}
		return r
	}
	if r := off("ls"); !regexp.MustCompile(`(?m)^ops/x\s+v1\s+2\s+3\s+10\s`).MatchString(r.stdout) {
		t.Fatalf("offline ls:\n%s", r.stdout)
	}
	if r := off("versions", "ops/x"); !strings.Contains(r.stdout, "region") {
		t.Fatalf("offline versions:\n%s", r.stdout)
	}
	if r := off("schema", "ops/x", "--version", "v0"); !strings.Contains(r.stdout, "note") {
		t.Fatalf("offline schema:\n%s", r.stdout)
	}
	if r := off("lineage", "ops/x"); strings.Count(r.stdout, "\n") != 2 || !strings.Contains(r.stdout, `"version":"v1"`) {
		t.Fatalf("offline lineage:\n%s", r.stdout)
	}
	if r := off("verify", "--sample", "0.5", "--seed", "7"); !strings.HasPrefix(r.stdout, "ok: ") {
		t.Fatalf("offline verify:\n%s", r.stdout)
	}
	if r := off("gc", "ops/x", "--keep", "1", "--grace", "0s"); !strings.Contains(r.stdout, "removed v0") {
		t.Fatalf("offline gc:\n%s", r.stdout)
	}
	if r := off("compact", "ops/x"); !strings.Contains(r.stdout, "compacted into ops/x v2") {
		t.Fatalf("offline compact:\n%s", r.stdout)
	}
	off("sweep", "--older-than", "0s")
	if r := off("verify"); !strings.HasPrefix(r.stdout, "ok: ") {
		t.Fatalf("offline verify after compact/gc/sweep:\n%s", r.stdout)
	}
	// A lock whose owner is gone: its pid cannot be alive.
	lock := filepath.Join(s.dataDir, "ops", "x", "manifest.json.write_lock")
	host, _ := os.Hostname()
	s.Storage.WriteFile(t, "ops/x/manifest.json.write_lock", fmt.Appendf(nil, `{"host":%q,"pid":999999999,"time":%q}`, host, time.Now().UTC().Format(time.RFC3339Nano)))
	if r := off("break-lock", "ops/x"); !strings.Contains(r.stdout, "broke the lock of ops/x") {
		t.Fatalf("offline break-lock:\n%s", r.stdout)
	}
	if _, err := os.Stat(lock); err == nil {
		t.Fatal("the lock is still there")
	}
	if e := failCLI(t, nil, "ls", "--data-dir", filepath.Join(dir, "nope")); !strings.Contains(e.stderr, "does not exist") {
		t.Fatalf("missing data dir: %s", e.stderr)
	}
}

var ansi = regexp.MustCompile("\x1b\\[")

func TestCLIPipeHasNoProgressOrColour(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a := cliBatch(0, 5000)
	defer a.Release()
	in := filepath.Join(dir, "in.parquet")
	writeInput(t, in, "parquet", a)
	for _, args := range [][]string{
		{"put", "pipe/x", in},
		{"get", "pipe/x"},
		{"get", "pipe/x", "-o", filepath.Join(dir, "o.parquet")},
		{"ls"}, {"versions", "pipe/x"}, {"schema", "pipe/x"}, {"verify"},
	} {
		r := mustCLI(t, s, args...)
		for name, out := range map[string]string{"stdout": r.stdout, "stderr": r.stderr} {
			if ansi.MatchString(out) || strings.Contains(out, "\r") || strings.Contains(out, "%|") || strings.Contains(out, "% [") {
				t.Fatalf("quiver %v wrote a progress bar or colour to the %s pipe:\n%q", args, name, out)
			}
		}
	}
	// --progress always forces the bar even on a pipe.
	r := mustCLI(t, s, "put", "--progress", "always", "pipe/x", in)
	if !strings.Contains(r.stderr, "put pipe/x") {
		t.Fatalf("--progress always: no bar on stderr: %q", r.stderr)
	}
	if ansi.MatchString(r.stderr) {
		t.Fatalf("--progress always on a pipe must not colour: %q", r.stderr)
	}
}

// onTerminal runs the binary with stdin, stdout and stderr on a
// pseudo-terminal and returns everything it wrote.
func onTerminal(t *testing.T, s *server, args ...string) string {
	t.Helper()
	cmd := exec.Command(binary, args...)
	cmd.Env = append(os.Environ(), "QUIVER_SERVER="+s.addr, "NO_COLOR=", "TERM=xterm-256color")
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 40, Cols: 160})
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	defer ptmx.Close()
	var out bytes.Buffer
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(&out, ptmx) // ends with EIO once the child has exited
		close(done)
	}()
	werr := cmd.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("pty output did not end")
	}
	if werr != nil {
		t.Fatalf("quiver %v on a terminal: %v\n%s", args, werr, out.String())
	}
	return out.String()
}

func TestCLITerminalHasProgressAndColour(t *testing.T) {
	s := startServer(t)
	dir := t.TempDir()
	a := cliBatch(0, 50000)
	defer a.Release()
	in := filepath.Join(dir, "in.parquet")
	writeInput(t, in, "parquet", a)

	out := onTerminal(t, s, "put", "tty/x", in)
	if !strings.Contains(out, "put tty/x") || !strings.Contains(out, "% [") || !ansi.MatchString(out) {
		t.Fatalf("put on a terminal: no coloured progress bar:\n%q", out)
	}
	if !strings.Contains(out, "committed tty/x v0 index 0") {
		t.Fatalf("put on a terminal: no commit:\n%q", out)
	}
	out = onTerminal(t, s, "get", "tty/x")
	if !strings.Contains(out, "\x1b[1m") || !strings.Contains(out, "50,000 rows × 5 columns") {
		t.Fatalf("get on a terminal: no table:\n%q", out)
	}
	if n := strings.Count(out, "apac"); n < 5 || n > 20 {
		t.Fatalf("get on a terminal printed %d rows of apac; want the first 20 rows only", n)
	}
	out = onTerminal(t, s, "get", "tty/x", "-o", filepath.Join(dir, "o.arrow"))
	if !strings.Contains(out, "get tty/x") || !ansi.MatchString(out) {
		t.Fatalf("get -o on a terminal: no progress bar:\n%q", out)
	}
	// NO_COLOR turns colour off, not the bar.
	cmd := exec.Command(binary, "put", "tty/x", in)
	cmd.Env = append(os.Environ(), "QUIVER_SERVER="+s.addr, "NO_COLOR=1")
	ptmx, err := pty.Start(cmd)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	var buf bytes.Buffer
	done := make(chan struct{})
	go func() { _, _ = io.Copy(&buf, ptmx); close(done) }()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	<-done
	ptmx.Close()
	if strings.Contains(buf.String(), "\x1b[3") || !strings.Contains(buf.String(), "put tty/x") {
		t.Fatalf("NO_COLOR put on a terminal:\n%q", buf.String())
	}
}

// readmeBlocks are the commands of the ```sh blocks of README.md's
// Quickstart section, comments and blank lines dropped, one slice per block.
func readmeBlocks(t *testing.T) [][]string {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	section := regexp.MustCompile("(?s)\n## Quickstart\n(.*?)\n## ").FindSubmatch(readme)
	if section == nil {
		t.Fatal("README.md has no Quickstart section")
	}
	var blocks [][]string
	for _, b := range regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllSubmatch(section[1], -1) {
		var cmds []string
		for _, line := range strings.Split(string(b[1]), "\n") {
			if c, _, _ := strings.Cut(line, "#"); strings.TrimSpace(c) != "" {
				cmds = append(cmds, strings.TrimSpace(c))
			}
		}
		blocks = append(blocks, cmds)
	}
	return blocks
}

// TestCLIReadmeQuickstart runs README.md's quickstart as written: the
// serve command (with --addr 127.0.0.1:0 added, so it runs whether or not
// the default port 8815 is taken, as it is while someone follows the
// README), then every command of the "second terminal" block verbatim,
// from the repository root, with QUIVER_SERVER naming that server (what
// the commands' default, localhost:8815, would be) and bin/quiver built
// into a temp dir instead of the working tree. `make test` itself runs
// only with QUIVER_QUICKSTART_MAKE=1, since it runs this very test (and
// the Python suite) and takes minutes; otherwise `make -n test` checks
// that the target exists.
func TestCLIReadmeQuickstart(t *testing.T) {
	blocks := readmeBlocks(t)
	if len(blocks) < 2 {
		t.Fatalf("README.md's Quickstart has %d sh blocks, want the server's and the second terminal's", len(blocks))
	}
	cmds := blocks[0]
	if len(cmds) != 2 || cmds[0] != "go run ./cmd/quiver serve" || cmds[1] != "make test" {
		t.Fatalf("quickstart commands changed: %q (update this test with the README)", cmds)
	}
	second := blocks[1]
	var sawPut, sawGet, sawLs bool
	for _, c := range second {
		f := strings.Fields(c)
		sawPut = sawPut || (len(f) > 1 && f[0] == "bin/quiver" && f[1] == "put")
		sawGet = sawGet || (len(f) > 1 && f[0] == "bin/quiver" && f[1] == "get")
		sawLs = sawLs || (len(f) > 1 && f[0] == "bin/quiver" && f[1] == "ls")
	}
	if len(second) == 0 || !strings.HasPrefix(second[0], "go build -o bin/quiver ") || !sawPut || !sawGet || !sawLs {
		t.Fatalf("second-terminal commands changed: %q (update this test with the README)", second)
	}

	// The serve command, from the repository root. Its data dir comes from
	// QUIVER_DATA_DIR so a test never writes into ./data.
	serve := exec.Command("sh", "-c", cmds[0]+" --addr 127.0.0.1:0")
	serve.Dir = ".."
	serve.Env = append(os.Environ(), "QUIVER_DATA_DIR="+t.TempDir(), "QUIVER_ADDR=", "QUIVER_LOG_LEVEL=warn")
	serve.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // go run's child too
	stdout, err := serve.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	serve.Stderr = &logs
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	pgid := serve.Process.Pid
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = syscall.Kill(-pgid, syscall.SIGTERM)
			_ = serve.Wait()
		}
	}
	t.Cleanup(stop)
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "quiver: serving ") {
				lines <- sc.Text()
			}
		}
	}()
	var addr string
	select {
	case l := <-lines:
		m := regexp.MustCompile(` on (127\.0\.0\.1:\d+)$`).FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("serve: %q, want it on 127.0.0.1:<port>", l)
		}
		addr = m[1]
	case <-time.After(3 * time.Minute):
		t.Fatalf("go run ./cmd/quiver serve did not start:\n%s", logs.String())
	}

	// The second terminal, verbatim but for where bin/quiver goes.
	bin := filepath.Join(t.TempDir(), "bin", "quiver")
	outputs := map[string]string{}
	for _, c := range second {
		c = strings.ReplaceAll(c, "bin/quiver", bin)
		cmd := exec.Command("sh", "-c", c)
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "QUIVER_SERVER="+addr, "QUIVER_TOKEN=")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s: %v\n%s\nserver log:\n%s", c, err, out, logs.String())
		}
		if f := strings.Fields(c); len(f) > 1 && f[0] == bin {
			outputs[f[1]] = string(out)
		}
	}
	if !strings.HasPrefix(outputs["put"], "committed sales/orders v0 index 0 (write): 40 rows, 1 file") {
		t.Errorf("put: %q", outputs["put"])
	}
	if !strings.HasPrefix(outputs["get"], "order_id,order_date,region,customer,product,quantity,unit_price,total\n1001,2026-01-05,") {
		t.Errorf("get (CSV on a pipe): %q", outputs["get"])
	}
	if !regexp.MustCompile(`(?m)^sales/orders +v0 +1 +1 +40 `).MatchString(outputs["ls"]) {
		t.Errorf("ls: %q", outputs["ls"])
	}
	stop()

	if os.Getenv("QUIVER_QUICKSTART_MAKE") != "1" {
		t.Log("`make test` not run (it runs this test); set QUIVER_QUICKSTART_MAKE=1 to run it too")
		out, err := exec.Command("make", "-C", "..", "-n", "test").CombinedOutput()
		if err != nil {
			t.Fatalf("make -n test: %v\n%s", err, out)
		}
		return
	}
	mk := exec.Command("sh", "-c", cmds[1])
	mk.Dir = ".."
	mk.Env = append(os.Environ(), "QUIVER_QUICKSTART_MAKE=0")
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make test: %v\n%s", err, out)
	}
}
