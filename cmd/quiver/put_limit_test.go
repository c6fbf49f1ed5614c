package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/flightserver"
)

// TestPutBatchOverServerMessageLimit: `quiver put` of an Arrow file whose
// one batch (21 MB) is over a server's 8 MiB message limit goes in, sliced
// at --max-batch-bytes (4 MiB by default); sliced above the limit, it
// fails with a message naming the sizes, the server's flag and
// --max-batch-bytes (red team round 12's c06: grpc-go's bare "received
// message larger than max (21600169 vs. 8388608)").
func TestPutBatchOverServerMessageLimit(t *testing.T) {
	addr, _ := testServer(t, flightserver.WithMaxRecvMsgSize(8<<20))
	in := filepath.Join(t.TempDir(), "big.arrow")
	writeBigArrow(t, in, 400_000, strings.Repeat("x", 50))
	cases := []struct {
		name  string
		flags []string
		want  []string // parts of the error; none: the put goes in
	}{
		{"default", nil, nil},
		{"sliced under the limit", []string{"--max-batch-bytes", "6MiB"}, nil},
		{"sliced over the limit", []string{"--max-batch-bytes", "32MiB"},
			[]string{"over its limit of 8388608 bytes", "--max-recv-msg-size", "nothing was committed", "--max-batch-bytes, now 32MiB"}},
		{"not a size", []string{"--max-batch-bytes", "lots"}, []string{`--max-batch-bytes: "lots" is not a size`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			args := append([]string{"put", "--server=" + addr, "--progress=never"}, c.flags...)
			args = append(args, "big/"+strings.ReplaceAll(c.name, " ", "-"), in)
			_, stderr, err := run(t, args...)
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("put: %v\n%s", err, stderr)
				}
				return
			}
			if err == nil {
				t.Fatal("put went in")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

// TestPutSchemaOverServerMessageLimit: `quiver put` of a CSV file whose
// schema alone (3,000 columns of 100-byte names) is over a server's 256
// KiB message limit fails with an error naming the schema, its column
// count and what helps, at any --max-batch-bytes, and without the
// --max-batch-bytes hint (red team round 13's e10: the error advised
// slicing, which cannot shrink a schema).
func TestPutSchemaOverServerMessageLimit(t *testing.T) {
	addr, _ := testServer(t, flightserver.WithMaxRecvMsgSize(256<<10))
	var head, row strings.Builder
	for i := range 3000 {
		if i > 0 {
			head.WriteByte(',')
			row.WriteByte(',')
		}
		fmt.Fprintf(&head, "c%05d_%s", i, strings.Repeat("n", 93))
		fmt.Fprintf(&row, "%d", i)
	}
	in := writeCSV(t, "wide.csv", head.String()+"\n"+row.String()+"\n")
	for _, mb := range []string{"4MiB", "1KiB"} {
		t.Run(mb, func(t *testing.T) {
			_, stderr, err := run(t, "put", "--server="+addr, "--progress=never", "--max-batch-bytes", mb, "wide/"+mb, in)
			if err == nil {
				t.Fatalf("put went in\n%s", stderr)
			}
			for _, w := range []string{"schema of 3000 columns", "over the server's limit of 262144 bytes", "raise the server's --max-recv-msg-size", "fewer columns or shorter column names"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			for _, w := range []string{"--max-batch-bytes, now", "fewer rows"} {
				if strings.Contains(err.Error(), w) {
					t.Errorf("error %q gives slicing advice %q", err, w)
				}
			}
		})
	}
}

// writeBigArrow writes an Arrow IPC file of one batch: n rows of s.
func writeBigArrow(t *testing.T, path string, n int, s string) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	b := array.NewStringBuilder(memory.DefaultAllocator)
	defer b.Release()
	for range n {
		b.Append(s)
	}
	col := b.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(n))
	defer rec.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
}
