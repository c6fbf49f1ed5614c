//go:build !cgo

package codec

import (
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/klauspost/compress/zstd"
)

// zstdEncoders are klauspost/compress encoders by level.
var zstdEncoders freeList[*zstd.Encoder]

func zstdLevel(level int) zstd.EncoderLevel {
	if level == compress.DefaultCompressionLevel {
		return zstd.SpeedDefault
	}
	return zstd.EncoderLevelFromZstd(level)
}

// zstdEncode encodes src at level with an encoder of arrow-go's options
// (the frames arrow-go writes), taken from the free list.
func zstdEncode(dst, src []byte, level int) ([]byte, bool) {
	l := zstdLevel(level)
	enc, err := zstdEncoders.get(int(l), func() (*zstd.Encoder, error) {
		return zstd.NewWriter(nil, zstd.WithZeroFrames(true), zstd.WithEncoderLevel(l),
			zstd.WithEncoderConcurrency(1), zstd.WithAllLitEntropyCompression(true))
	})
	if err != nil {
		return nil, false
	}
	out := enc.EncodeAll(src, dst[:0])
	zstdEncoders.put(int(l), enc)
	return out, true
}

// zstdCgo reports whether pages are compressed by libzstd: not in this
// build (klauspost/compress).
const zstdCgo = false
