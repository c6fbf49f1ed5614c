package codec

import (
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// zstdCodec replaces arrow-go's zstd codec for encoding (decoding and
// streams are arrow-go's). arrow-go keeps its encoders in a sync.Pool,
// which every GC empties: a server writing many small files (appends)
// built a new encoder, and allocated its history and tables (about
// 600 KiB), again after every collection; in an allocation profile of
// 32 concurrent appenders that was the third largest allocator. Here
// encoders live in a free list that GC does not empty, made with
// arrow-go's options, so the frames written are the same
// (BenchmarkZstdSmallPages, TestZstdCodecMatchesArrowGo).
type zstdCodec struct {
	compress.Codec // arrow-go's, for everything but encoding
}

var (
	zstdLevelsMu sync.Mutex
	zstdLevels   = map[zstd.EncoderLevel]chan *zstd.Encoder{}
)

func init() {
	orig, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(err) // arrow-go registers zstd in its own init
	}
	compress.RegisterCodec(compress.Codecs.Zstd, zstdCodec{orig})
}

// zstdFree is the free list of encoders of level l.
func zstdFree(l zstd.EncoderLevel) chan *zstd.Encoder {
	zstdLevelsMu.Lock()
	defer zstdLevelsMu.Unlock()
	ch, ok := zstdLevels[l]
	if !ok {
		ch = make(chan *zstd.Encoder, 2*runtime.GOMAXPROCS(0))
		zstdLevels[l] = ch
	}
	return ch
}

func zstdLevel(level int) zstd.EncoderLevel {
	if level == compress.DefaultCompressionLevel {
		return zstd.SpeedDefault
	}
	return zstd.EncoderLevelFromZstd(level)
}

// Encode implements compress.Codec.
func (z zstdCodec) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

// EncodeLevel implements compress.Codec: EncodeAll with an encoder of
// the free list (one goroutine uses an encoder at a time).
func (z zstdCodec) EncodeLevel(dst, src []byte, level int) []byte {
	free := zstdFree(zstdLevel(level))
	var enc *zstd.Encoder
	select {
	case enc = <-free:
	default:
		var err error
		// arrow-go's options: the same frames.
		enc, err = zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(zstdLevel(level)),
			zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
		if err != nil {
			return z.Codec.EncodeLevel(dst, src, level)
		}
	}
	out := enc.EncodeAll(src, dst[:0])
	select {
	case free <- enc:
	default: // enough kept
	}
	return out
}

// DecodeWithError implements compress.ErrorCodec.
//
// The page is decoded into dst's memory (copied there if the decoder
// gave it other memory, which it does only when dst is too small): the
// Parquet reader keeps dst as the page, and its memory is not cleared
// beforehand (UnzeroedAllocator).
func (z zstdCodec) DecodeWithError(dst, src []byte) ([]byte, error) {
	out, err := compress.Decode(z.Codec, dst, src)
	if err == nil && len(out) > 0 && len(out) <= cap(dst) && &out[0] != &dst[:1][0] {
		out = dst[:copy(dst[:len(out)], out)]
	}
	return out, err
}

// NewReader implements compress.StreamingCodec.
func (z zstdCodec) NewReader(r io.Reader) io.ReadCloser {
	return z.Codec.(compress.StreamingCodec).NewReader(r)
}

// NewWriter implements compress.StreamingCodec.
func (z zstdCodec) NewWriter(w io.Writer) io.WriteCloser {
	return z.Codec.(compress.StreamingCodec).NewWriter(w)
}

// NewWriterLevel implements compress.StreamingCodec.
func (z zstdCodec) NewWriterLevel(w io.Writer, level int) (io.WriteCloser, error) {
	return z.Codec.(compress.StreamingCodec).NewWriterLevel(w, level)
}
