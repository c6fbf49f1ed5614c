package codec

import (
	"bytes"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// TestZstdCodecMatchesArrowGo: the registered zstd codec writes the same
// frames as arrow-go's own encoder options, its output decodes to the
// input, and concurrent use keeps encoders apart.
func TestZstdCodecMatchesArrowGo(t *testing.T) {
	c, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(zstdCodec); !ok {
		t.Fatalf("the registered zstd codec is %T, want codec.zstdCodec", c)
	}
	ref, err := zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(1)),
		zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(1, 2))
	inputs := [][]byte{nil, {0}, bytes.Repeat([]byte("quiver"), 10_000)}
	for _, n := range []int{100, 8 << 10, 200 << 10, 1 << 20} {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.IntN(16)) // compressible, not trivially
		}
		inputs = append(inputs, b)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for round := range 20 {
				for i, in := range inputs {
					got := c.EncodeLevel(nil, in, 1)
					if round == 0 && g == 0 {
						if want := ref.EncodeAll(in, nil); !bytes.Equal(got, want) {
							t.Errorf("input %d: frames differ from arrow-go's encoder options", i)
						}
					}
					back, err := compress.Decode(c, make([]byte, 0, len(in)), got)
					if err != nil || !bytes.Equal(back, in) {
						t.Errorf("input %d: round trip: %v", i, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	if _, err := compress.Decode(c, nil, []byte("not zstd")); err == nil {
		t.Error("decoding garbage: no error")
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
