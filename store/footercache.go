package store

import (
	"container/list"
	"sync"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// footerCache keeps the parsed footers of the Parquet files reads opened,
// so that the next read of a file does not read and parse its footer
// again: with many files per read (a partitioned version, or the history
// of small appends) parsing them was a fifth of the CPU of a read of two
// columns (docs/benchmarks.md). Entries are keyed by the file's path, its
// commit record's SHA-256 and its stamp (fsys.Stamper: inode, change time
// and size on a local disk), so a file replaced or altered since gets
// another key and is parsed from its bytes, and checked as before. Least
// recently used entries go first once the footers' bytes pass the limit.
type footerCache struct {
	mu    sync.Mutex
	limit int
	bytes int
	lru   *list.List // of *footerEntry, most recent first
	m     map[string]*list.Element
}

type footerEntry struct {
	key  string
	md   *metadata.FileMetaData
	size int
	// rowBytes is the decoded size of a row of the file measured by a
	// read of the columns keyed (codec.ParquetFile.RowBytes), so that the
	// next read of them sizes its batches without decoding rows twice to
	// measure it: for a read of one file that was a tenth of its CPU.
	rowBytes map[string]float64
}

// rowBytesPerFile bounds the projections whose row size an entry keeps.
const rowBytesPerFile = 8

// footerCacheBytes bounds the footers kept, by their serialized size: the
// parsed form takes about 7 times as much heap (measured on the
// benchmark's files), so about 15 MB at most; the 64 files of the
// benchmark's 20-column version take 0.45 MiB.
const footerCacheBytes = 2 << 20

func newFooterCache(limit int) *footerCache {
	return &footerCache{limit: limit, lru: list.New(), m: map[string]*list.Element{}}
}

func (c *footerCache) get(key string) *metadata.FileMetaData {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return nil
	}
	c.lru.MoveToFront(e)
	return e.Value.(*footerEntry).md
}

func (c *footerCache) put(key string, md *metadata.FileMetaData) {
	if c == nil || md == nil {
		return
	}
	size := max(md.Size(), 1)
	if size > c.limit/4 {
		return // a huge footer would push out many others
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[key]; ok {
		return
	}
	c.m[key] = c.lru.PushFront(&footerEntry{key: key, md: md, size: size})
	c.bytes += size
	for c.bytes > c.limit {
		e := c.lru.Back()
		fe := e.Value.(*footerEntry)
		c.lru.Remove(e)
		delete(c.m, fe.key)
		c.bytes -= fe.size
	}
}

// rowBytes is the row size of the columns cols of the file of key kept
// by putRowBytes, or 0.
func (c *footerCache) rowBytes(key, cols string) float64 {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[key]; ok {
		return e.Value.(*footerEntry).rowBytes[cols]
	}
	return 0
}

// putRowBytes keeps the row size rb of the columns cols of the file of
// key while its footer is kept (a few projections per file).
func (c *footerCache) putRowBytes(key, cols string, rb float64) {
	if c == nil || rb <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[key]
	if !ok {
		return
	}
	fe := e.Value.(*footerEntry)
	if fe.rowBytes == nil {
		fe.rowBytes = map[string]float64{}
	}
	if _, ok := fe.rowBytes[cols]; ok || len(fe.rowBytes) >= rowBytesPerFile {
		return
	}
	fe.rowBytes[cols] = rb
	fe.size += len(cols) + 16
	c.bytes += len(cols) + 16
}
