package codec

import (
	"bytes"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// garbageMem is an UnzeroedAllocator whose unzeroed memory is garbage
// (0xA5), as a pool's reused buffers are: a byte of a page the reader did
// not overwrite shows in the values read.
type garbageMem struct {
	*memory.CheckedAllocator
	unzeroed atomic.Int64 // the columns of a batch decode in parallel
}

func (g *garbageMem) AllocateUnzeroed(size int) []byte {
	g.unzeroed.Add(1)
	b := g.Allocate(size)
	for i := range b {
		b[i] = 0xA5
	}
	return b
}

func (g *garbageMem) ReallocateUnzeroed(size int, b []byte) []byte {
	nb := g.AllocateUnzeroed(size)
	copy(nb, b)
	g.Free(b)
	return nb
}

// TestPageBuffersNotZeroed: the page buffers of a read come unzeroed from
// an UnzeroedAllocator, and every codec and page version overwrites them
// whole: files of every compression, data pages v1 and v2, dictionary and
// plain pages, nulls and nested columns read back exactly with page memory
// full of garbage.
func TestPageBuffersNotZeroed(t *testing.T) {
	sc := schemaOf(
		field("i", arrow.PrimitiveTypes.Int64, true),
		field("f", arrow.PrimitiveTypes.Float64, false),
		field("s", arrow.BinaryTypes.String, true),
		field("l", arrow.ListOf(arrow.PrimitiveTypes.Int32), true),
		field("b", arrow.FixedWidthTypes.Boolean, true),
	)
	var rows []string
	for i := range 3000 {
		s := fmt.Sprintf(`"v%d"`, i%37)
		if i%5 == 0 {
			s = "null"
		}
		if i%11 == 0 {
			s = fmt.Sprintf(`"%s"`, strings.Repeat("x", i%300))
		}
		l := fmt.Sprintf("[%d, %d]", i, -i)
		if i%7 == 0 {
			l = "null"
		}
		rows = append(rows, fmt.Sprintf(`{"i": %d, "f": %d.5, "s": %s, "l": %s, "b": %t}`, i*7919, i, s, l, i%3 == 0))
	}
	codecs := []compress.Compression{compress.Codecs.Zstd, compress.Codecs.Snappy, compress.Codecs.Gzip,
		compress.Codecs.Brotli, compress.Codecs.Lz4Raw, compress.Codecs.Uncompressed}
	for _, c := range codecs {
		for _, v2 := range []bool{false, true} {
			for _, dict := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/v2=%t/dict=%t", c, v2, dict), func(t *testing.T) {
					mem, ctx := checkedMem(t)
					want := batch(t, mem, sc, "["+strings.Join(rows, ",")+"]")
					defer want.Release()
					props := parquet.NewWriterProperties(parquet.WithCompression(c), parquet.WithDictionaryDefault(dict),
						parquet.WithDataPageVersion(map[bool]parquet.DataPageVersion{false: parquet.DataPageV1, true: parquet.DataPageV2}[v2]),
						parquet.WithDataPageSize(4<<10), parquet.WithMaxRowGroupLength(1000))
					var buf bytes.Buffer
					fw, err := pqarrow.NewFileWriter(sc, &buf, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
					if err != nil {
						t.Fatal(err)
					}
					if err := fw.Write(want); err != nil {
						t.Fatal(err)
					}
					if err := fw.Close(); err != nil {
						t.Fatal(err)
					}
					g := &garbageMem{CheckedAllocator: memory.NewCheckedAllocator(memory.NewGoAllocator())}
					for _, parallel := range []int{0, 2} {
						var got []arrow.RecordBatch
						err := eachBatch(t, ctx, buf.Bytes(), ReadOptions{Allocator: g, Parallel: parallel}, func(rec arrow.RecordBatch) {
							rec.Retain()
							got = append(got, rec)
						})
						if err != nil {
							t.Fatal(err)
						}
						tbl := array.NewTableFromRecords(sc, got)
						for _, r := range got {
							r.Release()
						}
						wantT := array.NewTableFromRecords(sc, []arrow.RecordBatch{want})
						if !array.TableEqual(tbl, wantT) {
							t.Errorf("parallel %d: the file read back differs", parallel)
						}
						tbl.Release()
						wantT.Release()
					}
					g.AssertSize(t, 0)
					if g.unzeroed.Load() == 0 {
						t.Fatal("no page buffer came from AllocateUnzeroed")
					}
				})
			}
		}
	}
}
