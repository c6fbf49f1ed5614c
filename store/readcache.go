package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/ipccache"
)

// WithCache gives the store an IPC cache of decoded files: reads that ask
// for it (ReadOptions.Cached, as DoGet does) stream cached files without
// decoding them, and fill the cache with the files they decode (an entry
// per file and set of columns read). With WithVerifyReads the cache is not
// used at all: a read sends only bytes it has just checked against their
// commit record, and a cache entry is not bound to that record.
func WithCache(c *ipccache.Cache) Option { return func(o *options) { o.cache = c } }

// WithReadAhead sets how many files a read decodes ahead of the one its
// consumer is on (default GOMAXPROCS-1, at least 1), each on its own
// goroutine.
func WithReadAhead(n int) Option { return func(o *options) { o.readAhead = n } }

// Cache is the store's IPC cache (nil: none).
func (s *Store) Cache() *ipccache.Cache { return s.cache }

// cacheKeyVersion changes when what an entry holds for a file changes
// (how a file is decoded into batches).
const cacheKeyVersion = "quiver-ipc-1"

// schemaPrint is the fingerprint of the schema a read decodes with: part
// of every cache key. A reader computes it once (SnapshotReader.print).
func schemaPrint(sc *arrow.Schema) string {
	return sha256Hex(flight.SerializeSchema(sc, memory.DefaultAllocator))
}

// fileStamp checks a committed file as opening it would (gone, replaced
// by a link, another size: the read's error) and returns its times, part
// of its cache key: a file altered in place gets another key, and is read
// — and checked — from its bytes. The change time (local disks) is in it
// because the modification time can be set back (`touch -r`, `cp -p`;
// red team round 15's h05). ok is false when the file has no
// modification time (it is then not cached).
func (s *Store) fileStamp(ctx context.Context, p profile, df DataFile) (string, bool, error) {
	st, err := s.fs.Stat(ctx, p.join(df.Path))
	if err != nil {
		return "", false, s.openErr(ctx, p, df, err)
	}
	if st.Size != df.Bytes {
		return "", false, fmt.Errorf("%w: %s: committed file %s has %d bytes, its commit record says %d", ErrDataLoss, p, df.Path, st.Size, df.Bytes)
	}
	if st.ModTime.IsZero() {
		return "", false, nil
	}
	stamp := strconv.FormatInt(st.ModTime.UnixNano(), 10)
	if !st.Changed.IsZero() {
		stamp += "." + strconv.FormatInt(st.Changed.UnixNano(), 10)
	}
	return stamp, true, nil
}

// cacheKey names the cache entry of a committed file read with columns
// (nil: every column, in the version's order): the file's path, the
// SHA-256 its record vouches for, its size, its times (fileStamp), and the
// schema it is read with.
func cacheKey(p profile, sn *Snapshot, schemaPrint string, df DataFile, stamp string, columns []string) ipccache.Key {
	cols := "*"
	if columns != nil {
		cols = "cols:" + strings.Join(columns, "\x00")
	}
	return ipccache.KeyOf(cacheKeyVersion, p.dir, df.Path, df.SHA256, strconv.FormatInt(df.Bytes, 10),
		stamp, string(sn.Format), schemaPrint, cols)
}

// hit returns the cache entry of key, or nil: a miss, or an entry that
// does not agree with the file's record or the schema it must have (it
// is then not used). (Reads with verify-reads never get here.)
func (r *SnapshotReader) hit(df DataFile, key ipccache.Key, sc *arrow.Schema) *ipccache.Entry {
	e := r.cache.Get(key)
	if e == nil {
		return nil
	}
	if (df.Rows >= 0 && e.Rows() != df.Rows && r.sn.Schema.NumFields() > 0) || !e.Schema().Equal(sc) {
		e.Release()
		return nil
	}
	return e
}

// openErr is the error for a committed file that cannot be opened or
// described: as openData reports it.
func (s *Store) openErr(ctx context.Context, p profile, df DataFile, err error) error {
	switch {
	case isNotExist(err):
		if s.retiredNow(ctx, p, df.Path) {
			return fmt.Errorf("%w: %s: file %s is gone: its version was removed by retention", ErrVersionNotFound, p, df.Path)
		}
		if df.Recorded {
			return fmt.Errorf("%w: %s: committed file %s is missing", ErrDataLoss, p, df.Path)
		}
		return fmt.Errorf("%w: %s: file %s is gone", ErrVersionNotFound, p, df.Path)
	case errors.Is(err, fsys.ErrUnsafePath) && df.Recorded:
		return fmt.Errorf("%w: %s: committed file %s was replaced by a symbolic link (not followed)", ErrDataLoss, p, df.Path)
	case errors.Is(err, fsys.ErrNotRegular) && df.Recorded:
		return fmt.Errorf("%w: %s: committed file %s was replaced by a directory or special file", ErrDataLoss, p, df.Path)
	}
	return fmt.Errorf("open %s %s: %w", p, df.Path, err)
}
