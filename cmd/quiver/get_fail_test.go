package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/quiverdb/quiver/flightserver"
)

// TestGetFailedReadLeavesOutputUnfinished: when a read fails part-way
// (a committed file damaged on disk: the third of three endpoints, or the
// first), `quiver get -o -` exits with the error and leaves stdout
// unreadable as a file of its format: no Parquet or Arrow footer, an IPC
// stream ended by an incomplete message. Before, stdout held a valid file
// with the rows read so far (red team round 12's c07). CSV has no end to
// leave off: it holds the header and the rows read so far, whole lines,
// then a final line CSV readers refuse (round 13's e08).
func TestGetFailedReadLeavesOutputUnfinished(t *testing.T) {
	addr, dir := testServer(t, flightserver.WithEndpointBytes(1))
	srv := "--server=" + addr
	for k := range 3 {
		var b strings.Builder
		b.WriteString("id,s\n")
		for i := range 1000 {
			fmt.Fprintf(&b, "%d,row%d\n", k*1000+i, i)
		}
		in := writeCSV(t, fmt.Sprintf("b%d.csv", k), b.String())
		mustRun(t, "put", srv, "--progress=never", "a/p", in)
		mustRun(t, "put", srv, "--progress=never", "c/p", in)
	}
	damage := func(profile string, n int) {
		f := filepath.Join(dir, profile, "v0", fmt.Sprintf("%d.parquet", n))
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for i := 100; i < 400; i++ {
			data[i] ^= 0x5a
		}
		if err := os.Chmod(f, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(f, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	damage("a/p", 0) // the first endpoint fails
	damage("c/p", 2) // the third: two were written

	mem := memory.NewGoAllocator()
	readable := map[string]func(b []byte) error{
		outParquet: func(b []byte) error {
			r, err := file.NewParquetReader(bytes.NewReader(b))
			if err == nil {
				r.Close()
			}
			return err
		},
		outArrow: func(b []byte) error {
			r, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(mem))
			if err == nil {
				r.Close()
			}
			return err
		},
		outArrows: func(b []byte) error {
			r, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(mem))
			if err != nil {
				return err
			}
			defer r.Release()
			for r.Next() {
			}
			return r.Err()
		},
	}
	csvAbort := ",,\"\xff " + csvAbortMessage + "\n"
	csvHead := "id,s\n"
	for i := range 2000 {
		csvHead += fmt.Sprintf("%d,row%d\n", i, i%1000)
	}
	cases := []struct {
		profile, format string
		csv             string // the CSV output
	}{
		{"a/p", outParquet, ""},
		{"a/p", outArrow, ""},
		{"a/p", outArrows, ""},
		{"a/p", outCSV, "id,s\n" + csvAbort},
		{"c/p", outParquet, ""},
		{"c/p", outArrow, ""},
		{"c/p", outArrows, ""},
		{"c/p", outCSV, csvHead + csvAbort},
	}
	for _, c := range cases {
		t.Run(c.profile+"/"+c.format, func(t *testing.T) {
			var out, errOut bytes.Buffer
			root := newRoot(&out, &errOut)
			root.SetArgs([]string{"get", srv, c.profile, "--format", c.format, "-o", "-", "--parallel", "1", "--progress=never"})
			err := root.ExecuteContext(context.Background())
			if err == nil || !strings.Contains(err.Error(), "lost or altered") {
				t.Fatalf("get: err %v, want the damaged file's", err)
			}
			if c.format == outCSV {
				if out.String() != c.csv {
					t.Fatalf("CSV of %d bytes, want %d: %.200q", out.Len(), len(c.csv), out.String())
				}
				return
			}
			if c.profile == "a/p" && out.Len() > 0 {
				// Nothing was read: nothing to poison either.
				t.Fatalf("stdout holds %d bytes (%.40q), want none", out.Len(), out.String())
			}
			if err := readable[c.format](out.Bytes()); err == nil {
				t.Fatalf("stdout (%d bytes) reads as a whole %s file", out.Len(), c.format)
			}
		})
	}
}

// TestCSVSinkAbortRefusedByReaders: a CSV sink aborted after a failed read
// (with no row, after whole batches, with one or two columns, a quoted
// header) ends with a line that a CSV reader refuses, where the output
// without that line reads as a whole table (red team round 13's e08:
// before, the output was a valid CSV of the rows read so far).
func TestCSVSinkAbortRefusedByReaders(t *testing.T) {
	one := []arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true}}
	two := []arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "a,b", Type: arrow.BinaryTypes.String, Nullable: true}}
	cases := []struct {
		name    string
		fields  []arrow.Field
		batches []string
		want    string // the output before the final line
	}{
		{"no row, one column", one, nil, "s\n"},
		{"rows, one column", one, []string{`[{"s": "x"}, {"s": null}]`, `[{"s": ""}]`}, "s\nx\n\n\"\"\n"},
		{"no row, two columns", two, nil, "id,\"a,b\"\n"},
		{"rows, two columns", two, []string{`[{"id": 1, "a,b": "q\"q"}]`, `[{"id": 2, "a,b": null}]`}, "id,\"a,b\"\n1,\"q\"\"q\"\n2,\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			sc := arrow.NewSchema(c.fields, nil)
			var buf bytes.Buffer
			sk, err := newSink(outCSV, &buf, sc, mem)
			if err != nil {
				t.Fatal(err)
			}
			for _, rows := range c.batches {
				rec := recordFromJSON(t, mem, sc, rows)
				err := sk.write(rec)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
			}
			sk.abort()
			out := buf.String()
			head, last, ok := strings.Cut(out, c.want)
			if !ok || head != "" {
				t.Fatalf("output %q does not start with %q", out, c.want)
			}
			if want := strings.Repeat(",", len(c.fields)) + "\"\xff " + csvAbortMessage + "\n"; last != want {
				t.Fatalf("final line %q, want %q", last, want)
			}
			if _, err := csv.NewReader(strings.NewReader(c.want)).ReadAll(); err != nil {
				t.Fatalf("the output without its final line: %v", err)
			}
			if _, err := csv.NewReader(strings.NewReader(out)).ReadAll(); err == nil {
				t.Fatalf("a CSV reader reads the aborted output %q", out)
			}
		})
	}
}
