package codec

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// TestZstdCodec: the registered zstd codec's frames decode with
// arrow-go's own codec (klauspost/compress) and arrow-go's frames with
// it, both to the input, with concurrent use keeping contexts apart;
// garbage and a frame with a flipped byte are errors (frames carry a
// checksum); built with cgo, libzstd encodes.
func TestZstdCodec(t *testing.T) {
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(zstdCodec); !ok {
		t.Fatalf("the registered zstd codec is %T, want codec.zstdCodec", c)
	}
	ref := c.(zstdCodec).Codec // arrow-go's
	r := rand.New(rand.NewPCG(1, 2))
	inputs := [][]byte{{0}, bytes.Repeat([]byte("quiver"), 10_000)}
	for _, n := range []int{100, 8 << 10, 200 << 10, 1 << 20} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(16)) // compressible, not trivially
		}
		inputs = append(inputs, b)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 10 {
				for i, in := range inputs {
					for _, enc := range []compress.Codec{c, ref} {
						frame := enc.EncodeLevel(make([]byte, 0, c.CompressBound(int64(len(in)))), in, 1)
						for _, dec := range []compress.Codec{c, ref} {
							back, err := compress.Decode(dec, make([]byte, len(in)), frame)
							if err != nil || !bytes.Equal(back, in) {
								t.Errorf("input %d: encoded by %T, decoded by %T: %v", i, enc, dec, err)
								return
							}
						}
					}
				}
			}
		})
	}
	wg.Wait()
	if _, err := compress.Decode(c, make([]byte, 100), []byte("not zstd at all")); err == nil {
		t.Error("decoding garbage: no error")
	}
	big := inputs[len(inputs)-1]
	frame := c.EncodeLevel(nil, big, 1)
	// Frames carry a checksum of their content: a flipped byte that still
	// decodes is caught by it (Quiver's frames and arrow-go's alike).
	for _, enc := range []compress.Codec{c, ref} {
		f := enc.EncodeLevel(nil, big, 1)
		for _, at := range []int{len(f) / 3, len(f) / 2, len(f) - 10} {
			g := bytes.Clone(f)
			g[at] ^= 0x01
			if _, err := compress.Decode(c, make([]byte, len(big)), g); err == nil {
				t.Errorf("%T's frame with byte %d of %d flipped decoded without error", enc, at, len(f))
			}
		}
	}
	if zstdCgo && bytes.Equal(frame, ref.EncodeLevel(nil, big, 1)) {
		t.Error("built with cgo, the frames are arrow-go's: libzstd is not encoding")
	}
}

// BenchmarkZstdPages encodes and decodes 1 MiB Parquet-like pages
// (plain-encoded integers, floats and short strings) at level 1 with the
// registered codec and with arrow-go's.
func BenchmarkZstdPages(b *testing.B) {
	c, _ := compress.GetCodec(compress.Codecs.Zstd)
	r := rand.New(rand.NewPCG(3, 4))
	page := make([]byte, 0, 1<<20)
	for len(page) < 1<<20-64 {
		page = binary.LittleEndian.AppendUint64(page, uint64(r.IntN(1_000_000)))
		page = binary.LittleEndian.AppendUint64(page, math.Float64bits(float64(r.IntN(100_000))/100))
		page = fmt.Appendf(page, "user-%d", r.IntN(5000))
	}
	for _, v := range []struct {
		name  string
		codec compress.Codec
	}{{"arrow-go", c.(zstdCodec).Codec}, {"quiver", c}} {
		frame := v.codec.EncodeLevel(nil, page, 1)
		b.Run(v.name+"/encode", func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			dst := make([]byte, 0, c.CompressBound(int64(len(page))))
			for b.Loop() {
				dst = v.codec.EncodeLevel(dst[:0], page, 1)
			}
			b.ReportMetric(float64(len(dst))/float64(len(page)), "ratio")
		})
		b.Run(v.name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(len(page)))
			dst := make([]byte, len(page))
			for b.Loop() {
				if _, err := compress.Decode(v.codec, dst, frame); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkZstdSmallPages compresses 8 KiB pages, as the files of small
// appends have, with a GC every 64 pages (a busy server collects that
// often): arrow-go's codec, whose encoders live in a sync.Pool, against
// the registered one, whose free list survives GC.
func BenchmarkZstdSmallPages(b *testing.B) {
	c, _ := compress.GetCodec(compress.Codecs.Zstd)
	r := rand.New(rand.NewPCG(1, 2))
	page := make([]byte, 8<<10)
	for i := range page {
		page[i] = byte(r.IntN(16))
	}
	for _, v := range []struct {
		name  string
		codec compress.Codec
	}{{"arrow-go", c.(zstdCodec).Codec}, {"quiver", c}} {
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(page)))
			var dst []byte
			i := 0
			for b.Loop() {
				dst = v.codec.EncodeLevel(dst[:0], page, 1)
				if i++; i%64 == 0 {
					runtime.GC()
				}
			}
		})
	}
}
