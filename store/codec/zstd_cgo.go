//go:build cgo

package codec

// libzstd's symbols come from github.com/DataDog/zstd, which compiles
// the library's C sources into the binary; its Go API has no way to set
// the checksum flag, so the few functions needed are declared here as
// zstd.h (v1.5) declares them.

/*
#include <stddef.h>

typedef struct ZSTD_CCtx_s ZSTD_CCtx;
ZSTD_CCtx* ZSTD_createCCtx(void);
size_t ZSTD_freeCCtx(ZSTD_CCtx* cctx);
size_t ZSTD_CCtx_setParameter(ZSTD_CCtx* cctx, int param, int value);
size_t ZSTD_compress2(ZSTD_CCtx* cctx, void* dst, size_t dstCapacity, const void* src, size_t srcSize);
unsigned ZSTD_isError(size_t code);

// ZSTD_cParameter values (zstd.h, stable API).
enum { quiver_ZSTD_c_compressionLevel = 100, quiver_ZSTD_c_checksumFlag = 201 };

// quiver_zstd_compress compresses src into dst with cctx at level, with
// a checksum of the content in the frame. It returns the frame's size,
// or 0 on error.
static size_t quiver_zstd_compress(ZSTD_CCtx* cctx, void* dst, size_t cap, const void* src, size_t n, int level) {
	if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, quiver_ZSTD_c_compressionLevel, level))) return 0;
	if (ZSTD_isError(ZSTD_CCtx_setParameter(cctx, quiver_ZSTD_c_checksumFlag, 1))) return 0;
	size_t r = ZSTD_compress2(cctx, dst, cap, src, n);
	return ZSTD_isError(r) ? 0 : r;
}
*/
import "C"

import (
	"runtime"
	"unsafe"

	"github.com/DataDog/zstd" // libzstd's C sources, and CompressBound
	"github.com/apache/arrow-go/v18/parquet/compress"
)

// zstdDefaultLevel is libzstd's default level (ZSTD_CLEVEL_DEFAULT).
const zstdDefaultLevel = 3

// cctx is a libzstd compression context, freed when collected.
type cctx struct{ p *C.ZSTD_CCtx }

func newCctx() (*cctx, error) {
	c := &cctx{p: C.ZSTD_createCCtx()}
	runtime.SetFinalizer(c, func(c *cctx) { C.ZSTD_freeCCtx(c.p) })
	return c, nil
}

// zstdCtxs are libzstd compression contexts.
var zstdCtxs freeList[*cctx]

// zstdEncode compresses src with libzstd at level (arrow-go's default
// level means libzstd's) into one frame with a checksum of its content
// (as arrow-go's encoder writes; decoders verify it), in dst's memory when
// it has room for the worst case, as arrow-go's page writer gives it.
func zstdEncode(dst, src []byte, level int) ([]byte, bool) {
	if level == compress.DefaultCompressionLevel {
		level = zstdDefaultLevel
	}
	bound := zstd.CompressBound(len(src))
	if cap(dst) < bound {
		dst = make([]byte, bound)
	}
	dst = dst[:bound]
	var in unsafe.Pointer
	if len(src) > 0 {
		in = unsafe.Pointer(&src[0])
	}
	c, _ := zstdCtxs.get(0, newCctx)
	n := C.quiver_zstd_compress(c.p, unsafe.Pointer(&dst[0]), C.size_t(len(dst)), in, C.size_t(len(src)), C.int(level))
	runtime.KeepAlive(c)
	zstdCtxs.put(0, c)
	if n == 0 {
		return nil, false
	}
	return dst[:n], true
}

// zstdCgo reports whether pages are compressed by libzstd: in this build.
const zstdCgo = true
