package codec

import (
	"io"
	"runtime"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/compress"
)

// zstdCodec replaces arrow-go's zstd codec for encoding pages (decoding
// and streams stay arrow-go's). Built with cgo (the default where a C
// compiler is), pages are encoded by libzstd, the C library pyarrow uses,
// bundled by github.com/DataDog/zstd (zstd_cgo.go): at level 1 it
// encodes Parquet pages about twice as fast as klauspost/compress,
// arrow-go's pure-Go codec, which spent 43% of a one-file put's CPU time
// (server CPU per put -23%, side by side). Its frames carry a checksum of
// their content, as arrow-go's do, which decoders verify: a page altered
// on disk fails its read. Without cgo, klauspost/compress encodes with
// arrow-go's options (zstd_purego.go). Either way the frames are
// standard zstd that every reader decodes.
//
// Decoding stays klauspost/compress's: libzstd through cgo decoded this
// data's pages 15-25% slower in the server (side by side, 2 columns and
// full reads), though faster on synthetic pages (BenchmarkZstdPages).
//
// Encoders live in free lists that GC does not empty. arrow-go keeps its
// encoders in a sync.Pool, which every GC empties: a server writing many
// small files (appends) built a new encoder, and allocated its history
// and tables, again after every collection; in an allocation profile of
// 32 concurrent appenders that was the third largest allocator.
type zstdCodec struct {
	compress.Codec // arrow-go's, for streams and CompressBound
}

func init() {
	orig, err := compress.GetCodec(compress.Codecs.Zstd)
	if err != nil {
		panic(err) // arrow-go registers zstd in its own init
	}
	compress.RegisterCodec(compress.Codecs.Zstd, zstdCodec{orig})
}

// freeList is a list of reusable (de)compression contexts, one user at
// a time each, that GC does not empty.
type freeList[T any] struct {
	mu    sync.Mutex
	lists map[int]chan T
}

// get takes a context of key k from the list, or makes one.
func (f *freeList[T]) get(k int, make func() (T, error)) (T, error) {
	select {
	case v := <-f.list(k):
		return v, nil
	default:
		return make()
	}
}

// put gives a context back (dropped when enough are kept).
func (f *freeList[T]) put(k int, v T) {
	select {
	case f.list(k) <- v:
	default:
	}
}

func (f *freeList[T]) list(k int) chan T {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch, ok := f.lists[k]
	if !ok {
		if f.lists == nil {
			f.lists = map[int]chan T{}
		}
		ch = make(chan T, 2*runtime.GOMAXPROCS(0))
		f.lists[k] = ch
	}
	return ch
}

// Encode implements compress.Codec.
func (z zstdCodec) Encode(dst, src []byte) []byte {
	return z.EncodeLevel(dst, src, compress.DefaultCompressionLevel)
}

// EncodeLevel implements compress.Codec.
func (z zstdCodec) EncodeLevel(dst, src []byte, level int) []byte {
	if out, ok := zstdEncode(dst, src, level); ok {
		return out
	}
	return z.Codec.EncodeLevel(dst, src, level)
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
