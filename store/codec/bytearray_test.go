package codec

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"pgregory.net/rapid"

	"github.com/quiverdb/quiver/internal/par"
)

// byteArrayCase is a random file of string-like columns and how to read it.
type byteArrayCase struct {
	file      []byte
	schema    *arrow.Schema
	rowGroups []int // nil: all
	batchRows int64
	parallel  int
	cols      []string
}

func genByteArrayCase(t *rapid.T) byteArrayCase {
	types := []arrow.DataType{arrow.BinaryTypes.String, arrow.BinaryTypes.Binary, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.LargeBinary}
	ncols := rapid.IntRange(1, 3).Draw(t, "cols")
	fields := []arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int32, Nullable: true}}
	for i := range ncols {
		fields = append(fields, arrow.Field{
			Name:     fmt.Sprintf("s%d", i),
			Type:     rapid.SampledFrom(types).Draw(t, "type"),
			Nullable: rapid.Bool().Draw(t, "nullable"),
		})
	}
	sc := arrow.NewSchema(fields, nil)
	mem := memory.NewGoAllocator()
	rows := rapid.IntRange(0, 3000).Draw(t, "rows")
	distinct := rapid.IntRange(1, 400).Draw(t, "distinct")
	maxLen := rapid.IntRange(0, 40).Draw(t, "maxLen")
	nullPct := rapid.IntRange(0, 100).Draw(t, "nullPct")
	seed := rapid.Uint64().Draw(t, "seed")
	rnd := func() uint64 { seed = seed*6364136223846793005 + 1442695040888963407; return seed >> 17 }
	vocab := make([]string, distinct)
	for i := range vocab {
		b := make([]byte, int(rnd()%uint64(maxLen+1)))
		for j := range b {
			b[j] = byte('a' + rnd()%26)
		}
		vocab[i] = string(b)
	}
	bld := array.NewRecordBuilder(mem, sc)
	defer bld.Release()
	for r := range rows {
		bld.Field(0).(*array.Int32Builder).Append(int32(r))
		for c := 1; c < len(fields); c++ {
			null := fields[c].Nullable && int(rnd()%100) < nullPct
			v := vocab[rnd()%uint64(distinct)]
			switch b := bld.Field(c).(type) {
			case *array.StringBuilder:
				if null {
					b.AppendNull()
				} else {
					b.Append(v)
				}
			case *array.LargeStringBuilder:
				if null {
					b.AppendNull()
				} else {
					b.Append(v)
				}
			case *array.BinaryBuilder:
				if null {
					b.AppendNull()
				} else {
					b.Append([]byte(v))
				}
			}
		}
	}
	rec := bld.NewRecordBatch()
	defer rec.Release()
	wopts := []parquet.WriterProperty{
		parquet.WithDictionaryDefault(rapid.Bool().Draw(t, "dict")),
		parquet.WithDictionaryPageSizeLimit(int64(rapid.SampledFrom([]int{64, 512, 1 << 20}).Draw(t, "dictLimit"))),
		parquet.WithDataPageSize(int64(rapid.SampledFrom([]int{64, 1024, 1 << 20}).Draw(t, "pageSize"))),
		parquet.WithBatchSize(int64(rapid.SampledFrom([]int{7, 100, 1024}).Draw(t, "writeBatch"))),
		parquet.WithDataPageVersion(rapid.SampledFrom([]parquet.DataPageVersion{parquet.DataPageV1, parquet.DataPageV2}).Draw(t, "pageVersion")),
		parquet.WithCompression(rapid.SampledFrom([]compress.Compression{compress.Codecs.Uncompressed, compress.Codecs.Snappy, compress.Codecs.Zstd}).Draw(t, "compression")),
		parquet.WithMaxRowGroupLength(int64(rapid.IntRange(1, 4000).Draw(t, "rowGroup"))),
	}
	var buf bytes.Buffer
	w, err := pqarrow.NewFileWriter(sc, &buf, parquet.NewWriterProperties(wopts...), pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	c := byteArrayCase{file: buf.Bytes(), schema: sc, batchRows: int64(rapid.IntRange(1, 5000).Draw(t, "batchRows")), parallel: rapid.IntRange(1, 3).Draw(t, "parallel")}
	pr, err := file.NewParquetReader(bytes.NewReader(c.file))
	if err != nil {
		t.Fatal(err)
	}
	if n := pr.NumRowGroups(); n > 0 && rapid.Bool().Draw(t, "someGroups") {
		for rg := range n {
			if rapid.Bool().Draw(t, "group") {
				c.rowGroups = append(c.rowGroups, rg)
			}
		}
		if c.rowGroups == nil {
			c.rowGroups = []int{}
		}
	}
	pr.Close()
	for _, f := range fields {
		if rapid.Bool().Draw(t, "col") {
			c.cols = append(c.cols, f.Name)
		}
	}
	if len(c.cols) == 0 {
		c.cols = []string{fields[len(fields)-1].Name}
	}
	return c
}

// readAll reads a case through codec (fast=true) or through pqarrow
// alone (the reference), as one table rendered as text.
func (c byteArrayCase) read(ctx context.Context, mem memory.Allocator, fast bool) (string, error) {
	if !fast {
		pr, err := file.NewParquetReader(bytes.NewReader(c.file), file.WithReadProps(parquet.NewReaderProperties(mem)))
		if err != nil {
			return "", err
		}
		defer pr.Close()
		fr, err := pqarrow.NewFileReader(pr, pqarrow.ArrowReadProperties{BatchSize: c.batchRows}, mem)
		if err != nil {
			return "", err
		}
		sc, _ := fr.Schema()
		var leaves []int
		for _, name := range c.cols {
			leaves = append(leaves, sc.FieldIndices(name)[0])
		}
		if c.rowGroups != nil && len(c.rowGroups) == 0 {
			return "", nil
		}
		rr, err := fr.GetRecordReader(ctx, leaves, c.rowGroups)
		if err != nil {
			return "", err
		}
		defer rr.Release()
		return renderReader(rr, c.cols)
	}
	pf, err := OpenParquet(bytes.NewReader(c.file), int64(len(c.file)), ReadOptions{BatchRows: c.batchRows, Allocator: mem, Parallel: c.parallel})
	if err != nil {
		return "", err
	}
	defer pf.Close()
	rr, err := pf.RecordsIn(ctx, c.cols, c.rowGroups)
	if err != nil {
		return "", err
	}
	defer rr.Release()
	return renderReader(rr, c.cols)
}

// renderReader renders every row of rr's columns cols, by name, batch
// boundaries left out.
func renderReader(rr array.RecordReader, cols []string) (string, error) {
	var b bytes.Buffer
	for rr.Next() {
		rec := rr.RecordBatch()
		for i := range int(rec.NumRows()) {
			for _, name := range cols {
				col := rec.Column(rec.Schema().FieldIndices(name)[0])
				if col.IsNull(i) {
					b.WriteString("∅|")
					continue
				}
				fmt.Fprintf(&b, "%q|", col.ValueStr(i))
			}
			b.WriteByte('\n')
		}
	}
	return b.String(), rr.Err()
}

// TestByteArrayReaderMatchesPqarrow reads random string and binary columns
// (nullable or not, dictionary or plain or a dictionary that falls back to
// plain, pages v1 and v2, several codecs, row group subsets) through the
// direct byte-array decoder and through pqarrow, and wants the same rows.
func TestByteArrayReaderMatchesPqarrow(t *testing.T) {
	before := byteArrayReaders.Load()
	defer func() {
		if byteArrayReaders.Load() == before {
			t.Error("no column was read by the byte-array decoder")
		}
	}()
	rapid.Check(t, func(t *rapid.T) {
		c := genByteArrayCase(t)
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		ctx := context.Background()
		want, err := c.read(ctx, mem, false)
		if err != nil {
			t.Fatalf("pqarrow: %v", err)
		}
		got, err := c.read(ctx, mem, true)
		if err != nil {
			t.Fatalf("codec: %v", err)
		}
		if got != want {
			t.Fatalf("codec read differs from pqarrow's:\ngot  %.400s\nwant %.400s", got, want)
		}
		mem.AssertSize(t, 0)
	})
}

// FuzzByteArrayReader mutates files of string columns: the direct decoder
// must never panic, and whatever it reads must be what pqarrow reads when
// pqarrow reads the file too.
func FuzzByteArrayReader(f *testing.F) {
	gen := rapid.Custom(genByteArrayCase)
	for i := range 8 {
		c := gen.Example(i)
		f.Add(c.file, uint16(c.batchRows))
	}
	f.Fuzz(func(t *testing.T, data []byte, batch uint16) {
		sc := fileSchema(data)
		if sc == nil {
			return
		}
		c := byteArrayCase{file: data, batchRows: int64(batch%4096) + 1, parallel: 2}
		for _, fl := range sc.Fields() {
			c.cols = append(c.cols, fl.Name)
		}
		ctx := context.Background()
		got, gerr := safeRead(ctx, c, true)
		want, werr := safeRead(ctx, c, false)
		// arrow-go panics on some corrupt pages (the store recovers
		// those); a panic raised in this package's code is a bug.
		var p panicked
		if errors.As(gerr, &p) && p.ours() {
			t.Fatalf("the direct decoder panicked: %v", gerr)
		}
		if gerr == nil && werr == nil && got != want {
			t.Fatalf("codec read differs from pqarrow's:\ngot  %.300s\nwant %.300s", got, want)
		}
	})
}

// fileSchema is the Arrow schema of a Parquet file; nil when OpenParquet
// refuses it (or arrow-go panics reading its footer: its footer parser is
// not what this fuzzer tests).
func fileSchema(data []byte) (sc *arrow.Schema) {
	defer func() {
		if recover() != nil {
			sc = nil
		}
	}()
	pf, err := OpenParquet(bytes.NewReader(data), int64(len(data)), ReadOptions{})
	if err != nil {
		return nil
	}
	defer pf.Close()
	return pf.Schema()
}

type panicked struct {
	v     any
	stack string
}

func (p panicked) Error() string { return fmt.Sprint("panic: ", p.v) }

// ours reports whether the panic was raised in this package's code: the
// first frame below the panic is a codec function.
func (p panicked) ours() bool {
	stack := p.stack
	if wp, ok := p.v.(par.Panic); ok {
		stack = string(wp.Stack)
	}
	return strings.HasPrefix(panicFrame(stack), "github.com/quiverdb/quiver/store/codec.")
}

func safeRead(ctx context.Context, c byteArrayCase, fast bool) (s string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = panicked{v: v, stack: string(debug.Stack())}
		}
	}()
	return c.read(ctx, memory.DefaultAllocator, fast)
}
