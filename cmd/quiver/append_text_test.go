package main

// Red team round 13's e05 and e06 end to end, against a server in process:
// CSV and NDJSON appended to a profile are read as the profile's types,
// and get's CSV of lists (JSON arrays) tells [], [null] and null apart and
// reads back with put.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/flightserver"
)

// readProfile reads the latest version of profile whole and returns its
// schema and each column's values as cellString shows them.
func readProfile(t *testing.T, addr, profile string) (*arrow.Schema, map[string][]string) {
	t.Helper()
	ctx := t.Context()
	c, err := client.Connect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rdr, err := c.Read(ctx, client.ReadRequest{Path: profile})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	cols := map[string][]string{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		for j, f := range rec.Schema().Fields() {
			for i := range int(rec.NumRows()) {
				cols[f.Name] = append(cols[f.Name], cellString(rec.Column(j), i))
			}
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	return rdr.Schema(), cols
}

// commits is the number of commits of profile's latest version.
func commits(t *testing.T, addr, profile string) string {
	t.Helper()
	out := mustRun(t, "versions", "--server="+addr, "--json", profile)
	i := strings.LastIndex(out, `"commits": `)
	if i < 0 {
		t.Fatalf("versions: %s", out)
	}
	return strings.TrimSuffix(strings.Fields(out[i+len(`"commits": `):])[0], ",")
}

func putText(t *testing.T, addr string, args ...string) (string, error) {
	t.Helper()
	_, stderr, err := run(t, append([]string{"put", "--server=" + addr, "--progress=never"}, args...)...)
	if err != nil {
		return stderr + err.Error(), err
	}
	return "", nil
}

// TestAppendTextReadsProfileTypes (e05): whole numbers appended to a
// float64 column are floats, a column empty in every row of the file (or
// null, or absent, in NDJSON) is null in an int64 column; the file alone
// made them int64 and string, and the append was refused.
func TestAppendTextReadsProfileTypes(t *testing.T) {
	addr, _ := testServer(t)
	mustRun(t, "put", "--server="+addr, "--progress=never", "t/f", writeCSV(t, "f0.csv", "id,amount\n1,1.5\n"))
	if msg, err := putText(t, addr, "t/f", writeCSV(t, "f1.csv", "id,amount\n2,2\n3,3\n")); err != nil {
		t.Fatalf("whole numbers into float64: %s", msg)
	}
	sc, cols := readProfile(t, addr, "t/f")
	if typ := sc.Field(sc.FieldIndices("amount")[0]).Type; typ.ID() != arrow.FLOAT64 {
		t.Fatalf("amount is %s", typ)
	}
	if got := strings.Join(cols["amount"], " "); got != "1.5 2 3" {
		t.Fatalf("amount %s", got)
	}

	mustRun(t, "put", "--server="+addr, "--progress=never", "t/i", writeCSV(t, "i0.csv", "id,amount\n1,10\n"))
	for name, body := range map[string]string{
		"i1.csv":    "id,amount\n2,\n3,\n",
		"i2.ndjson": `{"id":4,"amount":null}` + "\n",
		"i3.ndjson": `{"id":5}` + "\n",
	} {
		if msg, err := putText(t, addr, "t/i", writeCSV(t, name, body)); err != nil {
			t.Fatalf("%s: %s", name, msg)
		}
	}
	sc, cols = readProfile(t, addr, "t/i")
	if typ := sc.Field(sc.FieldIndices("amount")[0]).Type; typ.ID() != arrow.INT64 {
		t.Fatalf("amount is %s", typ)
	}
	if got := strings.Join(cols["amount"], " "); strings.Count(got, "null") != 4 || !strings.HasPrefix(got, "10 ") {
		t.Fatalf("amount %s", got)
	}
}

// TestAppendTextRefusesWhatDoesNotFit: a value that does not fit the
// profile's type is refused before anything is sent, naming the line, the
// column, the value and the type; so is a null in a non-nullable column.
func TestAppendTextRefusesWhatDoesNotFit(t *testing.T) {
	addr, _ := testServer(t)
	mustRun(t, "put", "--server="+addr, "--progress=never", "t/f", writeCSV(t, "f0.csv", "id,amount\n1,1.5\n"))
	for _, c := range []struct{ name, body, want string }{
		{"f1.csv", "id,amount\n2,2\n3,abc\n",
			`CSV line 3: column "amount" holds "abc", which does not fit float64, its type in t/f: not a number`},
		{"f2.csv", "id,amount\n2.5,2\n",
			`CSV line 2: column "id" holds "2.5", which does not fit int64, its type in t/f: not an integer`},
		{"f3.ndjson", `{"id":1,"amount":"1.5"}` + "\n",
			`NDJSON line 1: column "amount" holds "1.5", which does not fit float64, its type in t/f: a string where a number should be`},
		{"f4.ndjson", "{\"id\":1}\n{\"id\":9223372036854775808}\n",
			`NDJSON line 2: column "id" holds 9223372036854775808, which does not fit int64, its type in t/f: beyond the range of int64`},
	} {
		msg, err := putText(t, addr, "t/f", writeCSV(t, c.name, c.body))
		if err == nil || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s, want %q", c.name, msg, c.want)
		}
	}
	if n := commits(t, addr, "t/f"); n != "1" {
		t.Fatalf("%s commits after refused puts", n)
	}

	// A profile with a non-nullable column (from Arrow IPC).
	sc := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	p := filepath.Join(t.TempDir(), "nn.arrow")
	writeIPC(t, p, sc, `[{"id":1,"x":"a"}]`)
	mustRun(t, "put", "--server="+addr, "--progress=never", "t/nn", p)
	for _, c := range []struct{ name, body, want string }{
		{"n1.csv", "id,x\n2,b\n,c\n", `CSV line 3: column "id" is empty, which is null, but the column is not nullable in t/nn`},
		{"n2.ndjson", `{"id":null,"x":"c"}` + "\n", `NDJSON line 1: column "id" is null, but it is not nullable in t/nn`},
		{"n3.ndjson", `{"id":2}` + "\n" + `{"x":"c"}` + "\n", `NDJSON line 2: the object has no key "id", and that column is not nullable in t/nn`},
	} {
		msg, err := putText(t, addr, "t/nn", writeCSV(t, c.name, c.body))
		if err == nil || !strings.Contains(msg, c.want) {
			t.Errorf("%s: %s, want %q", c.name, msg, c.want)
		}
	}
	if msg, err := putText(t, addr, "t/nn", writeCSV(t, "n4.ndjson", `{"id":2}`+"\n")); err != nil {
		t.Fatalf("an absent nullable key: %s", msg)
	}
}

// writeIPC writes one batch (JSON rows) of sc as an Arrow IPC file.
func writeIPC(t *testing.T, p string, sc *arrow.Schema, rows string) {
	t.Helper()
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(rows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := ipc.NewFileWriter(f, ipc.WithSchema(sc))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAppendTextColumnsAsTheServer: columns are matched by name (another
// order is fine); a profile column the CSV lacks is refused before
// anything is sent, as the server refuses an Arrow put without it; a new
// column goes to the server, which takes it under a higher schema version;
// --mode write and a new profile keep the inference.
func TestAppendTextColumnsAsTheServer(t *testing.T) {
	addr, _ := testServer(t)
	mustRun(t, "put", "--server="+addr, "--progress=never", "t/c", writeCSV(t, "c0.csv", "id,amount\n1,1.5\n"))

	if msg, err := putText(t, addr, "t/c", writeCSV(t, "c1.csv", "amount,id\n2,2\n")); err != nil {
		t.Fatalf("columns in another order: %s", msg)
	}
	msg, err := putText(t, addr, "t/c", writeCSV(t, "c2.csv", "id,Amount\n3,3\n"))
	if err == nil || !strings.Contains(msg, `does not match the columns of t/c: it lacks ["amount"]`) || !strings.Contains(msg, `the header has "Amount"`) {
		t.Fatalf("a missing column: %s", msg)
	}
	msg, err = putText(t, addr, "t/c", writeCSV(t, "c3.csv", "id,amount,note\n3,3,x\n"))
	if err == nil || !strings.Contains(msg, "schema_version above") {
		t.Fatalf("a new column without a schema version: %s", msg)
	}
	if n := commits(t, addr, "t/c"); n != "2" {
		t.Fatalf("%s commits", n)
	}
	if msg, err := putText(t, addr, "--schema-version", "1.0.0", "t/c", writeCSV(t, "c4.csv", "note,id,amount\nx,3,3\n")); err != nil {
		t.Fatalf("a new column: %s", msg)
	}
	if msg, err := putText(t, addr, "--schema-version", "1.1.0", "t/c", writeCSV(t, "c5.ndjson", `{"id":4,"amount":4,"n2":true}`+"\n")); err != nil {
		t.Fatalf("a new NDJSON key: %s", msg)
	}
	sc, cols := readProfile(t, addr, "t/c")
	want := "id: int64, amount: float64, note: utf8, n2: bool"
	var got []string
	for _, f := range sc.Fields() {
		got = append(got, f.Name+": "+f.Type.String())
	}
	if strings.Join(got, ", ") != want || strings.Join(cols["amount"], " ") != "1.5 2 3 4" || strings.Join(cols["note"], " ") != "null null x null" {
		t.Fatalf("schema %s (want %s), values %v", strings.Join(got, ", "), want, cols)
	}

	// --mode write infers from the file, as a new profile does.
	mustRun(t, "put", "--server="+addr, "--progress=never", "--mode", "write", "t/c", writeCSV(t, "w.csv", "id,amount\n1,2\n"))
	if sc, _ := readProfile(t, addr, "t/c"); sc.Field(1).Type.ID() != arrow.INT64 {
		t.Fatalf("--mode write: %s", sc)
	}
}

// TestAppendTextToCSVProfile: a profile of CSV files has the types the
// server infers when it reads them, and it casts an append to them: text
// is read as those types too, so whole numbers fit its float64 column and
// 1.5 is refused by the client, naming the line, not by the server's cast.
func TestAppendTextToCSVProfile(t *testing.T) {
	addr, _ := testServer(t)
	ctx := t.Context()
	c, err := client.Connect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, sc, strings.NewReader(`[{"id":1,"x":0.5}]`))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	rdr, err := array.NewRecordReader(sc, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	if _, err := c.Put(ctx, "t/csv", rdr, client.PutOptions{Format: catalog.FormatCSV}); err != nil {
		t.Fatal(err)
	}
	if msg, err := putText(t, addr, "t/csv", writeCSV(t, "a.csv", "id,x\n2,2\n")); err != nil {
		t.Fatalf("append to a CSV profile: %s", msg)
	}
	msg, err := putText(t, addr, "t/csv", writeCSV(t, "b.csv", "id,x\n1.5,2\n"))
	if err == nil || !strings.Contains(msg, `CSV line 2: column "id" holds "1.5", which does not fit int64, its type in t/csv`) {
		t.Fatalf("1.5 into the int64 column of a CSV profile: %s", msg)
	}
	if _, cols := readProfile(t, addr, "t/csv"); fmt.Sprint(cols) != "map[id:[1 2] x:[0.5 2]]" {
		t.Fatalf("values %v", cols)
	}
}

// TestGetCSVListsRoundTrip (e06): get --format csv writes [], [null], a
// null list and lists of empty strings differently, and put reads its
// output back into the profile as the same values.
func TestGetCSVListsRoundTrip(t *testing.T) {
	addr, _ := testServer(t)
	str, i64 := arrow.ListOf(arrow.BinaryTypes.String), arrow.ListOf(arrow.PrimitiveTypes.Int64)
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "ls", Type: str, Nullable: true},
		{Name: "li", Type: i64, Nullable: true},
		{Name: "nested", Type: arrow.ListOf(i64), Nullable: true},
	}, nil)
	rows := `[{"id":1,"ls":[],"li":[],"nested":[[]]},
		{"id":2,"ls":[null],"li":[null],"nested":[null]},
		{"id":3,"ls":[null,null],"li":[null,null],"nested":[]},
		{"id":4,"ls":null,"li":null,"nested":null},
		{"id":5,"ls":[""],"li":[0],"nested":[[null],[1,2]]},
		{"id":6,"ls":["",null,"a,\"b\"]"],"li":[-1,9223372036854775807],"nested":[null,[]]}]`
	p := filepath.Join(t.TempDir(), "l.arrow")
	writeIPC(t, p, sc, rows)
	mustRun(t, "put", "--server="+addr, "--progress=never", "t/l", p)
	out := filepath.Join(t.TempDir(), "out.csv")
	mustRun(t, "get", "--server="+addr, "--progress=never", "t/l", "-o", out)
	text, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(text), "\n")
	seen := map[string]string{}
	for _, l := range lines[1:7] {
		id, rest, _ := strings.Cut(l, ",")
		if other, dup := seen[rest]; dup {
			t.Errorf("rows %s and %s are written alike: %s", other, id, rest)
		}
		seen[rest] = id
	}
	if lines[1] != "1,[],[],[[]]" || lines[2] != "2,[null],[null],[null]" || lines[4] != "4,,," {
		t.Errorf("CSV:\n%s", text)
	}
	_, before := readProfile(t, addr, "t/l")
	if msg, err := putText(t, addr, "t/l", out); err != nil {
		t.Fatalf("put of get's CSV: %s", msg)
	}
	_, after := readProfile(t, addr, "t/l")
	for _, col := range []string{"ls", "li", "nested"} {
		if a, b := fmt.Sprint(after[col][:6]), fmt.Sprint(after[col][6:]); a != b || a != fmt.Sprint(before[col]) {
			t.Errorf("%s: put back as %s, was %s", col, b, a)
		}
	}
	// cellString cannot tell "" from null in a list: compare the lists
	// of the strings' lengths and nulls exactly.
	if got := listStrings(t, addr, "t/l", "ls"); got[4] != got[10] || got[5] != got[11] || got[4] != `[""]` || got[5] != `["" null "a,\"b\"]"]` {
		t.Errorf("ls put back as %q", got)
	}
}

// listStrings reads column col (a list of strings) of profile, each list
// with its strings quoted and null as null.
func listStrings(t *testing.T, addr, profile, col string) []string {
	t.Helper()
	ctx := context.Background()
	c, err := client.Connect(ctx, addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rdr, err := c.Read(ctx, client.ReadRequest{Path: profile, Columns: []string{col}})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	var out []string
	for rdr.Next() {
		l := rdr.RecordBatch().Column(0).(*array.List)
		v := l.ListValues().(*array.String)
		for i := range l.Len() {
			if l.IsNull(i) {
				out = append(out, "null")
				continue
			}
			s, e := l.ValueOffsets(i)
			var items []string
			for k := s; k < e; k++ {
				if v.IsNull(int(k)) {
					items = append(items, "null")
				} else {
					items = append(items, fmt.Sprintf("%q", v.Value(int(k))))
				}
			}
			out = append(out, "["+strings.Join(items, " ")+"]")
		}
	}
	return out
}

// TestAppendTextAsksForTheSchemaAgain: the profile's schema is asked for
// again, as a put is retried, when the server cannot be reached; the
// append is then read as the profile's types (inference, without the
// schema, would make the whole numbers int64 and the server refuse them).
func TestAppendTextAsksForTheSchemaAgain(t *testing.T) {
	f := &failFirst{method: "GetSchema"}
	addr, _ := testServer(t, flightserver.WithGRPCOptions(grpc.ChainStreamInterceptor(f.intercept)))
	mustRun(t, "put", "--server="+addr, "--progress=never", "t/f", writeCSV(t, "f0.csv", "id,amount\n1,1.5\n"))
	f.mu.Lock()
	f.calls = 0 // (the put that made the profile was refused once too, and retried): fail the next ask
	f.mu.Unlock()
	_, stderr, err := run(t, "put", "--server="+addr, "--progress=never", "--request-id", "job-1", "t/f", writeCSV(t, "f1.csv", "id,amount\n2,2\n"))
	if err != nil || stderr != "quiver: server restarting (test); retrying in 1s (request id job-1)\n" {
		t.Fatalf("%v, stderr %q", err, stderr)
	}
	if _, cols := readProfile(t, addr, "t/f"); strings.Join(cols["amount"], " ") != "1.5 2" {
		t.Fatalf("amount %v", cols["amount"])
	}
}
