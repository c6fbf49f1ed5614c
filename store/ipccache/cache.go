package ipccache

import (
	"container/list"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"golang.org/x/sys/unix"
)

const (
	magic        = "QVRIPC1\n"
	trailerMagic = "QVRIPCE\n"
	formatV      = 2
	indexRow     = 40
	trailerLen   = 32
	entryExt     = ".arrows"
	lockName     = "cache.lock"
	// touchEvery is how often a hit rewrites an entry's modification
	// time, the order of use a restarted cache starts from.
	touchEvery = time.Minute
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Key names an entry: a hash of the parts that identify a decoded file.
type Key [32]byte

// KeyOf hashes parts (each length-prefixed, so ("ab","c") and ("a","bc")
// differ) into a Key.
func KeyOf(parts ...string) Key {
	h := sha256.New()
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write([]byte(p))
	}
	var k Key
	h.Sum(k[:0])
	return k
}

func (k Key) name() string { return hex.EncodeToString(k[:20]) }

// Stats are the cache's counters since Open, and its current size.
type Stats struct {
	Hits, Misses, Fills, Evictions, Corrupt uint64
	// HitBytes are the bytes of entries opened for reads; FillBytes of
	// entries written; EvictedBytes of entries evicted.
	HitBytes, FillBytes, EvictedBytes uint64
	// Bytes and Entries are what the cache holds now; MaxBytes its limit.
	Bytes    int64
	Entries  int
	MaxBytes int64
}

// Cache is a directory of entries, bounded in bytes. It is safe for
// concurrent use. One process at a time may open a directory.
type Cache struct {
	dir  string
	max  int64
	lock *os.File
	now  func() time.Time

	mu      sync.Mutex
	items   map[string]*item
	lru     list.List // of *item, most recently used first
	size    int64
	writing map[string]bool

	hits, misses, fills, evictions, corrupt atomic.Uint64
	hitBytes, fillBytes, evictedBytes       atomic.Uint64
}

// item is an entry the cache holds. Its parsed index is filled (and the
// whole file's checksum checked) the first time it is opened.
type item struct {
	name    string
	size    int64
	elem    *list.Element
	touched time.Time
	parsed  *parsed
}

// parsed is what an entry's schema and index say, checked once (each
// message is checked again whenever it is read).
type parsed struct {
	schema     *arrow.Schema
	schemaMeta []byte
	msgs       []Message
	rows       int64
}

// Open opens (creating it) the cache directory dir holding at most
// maxBytes of entries. It removes temp files a killed process left,
// and evicts down to maxBytes. ErrLocked if another process has it open.
func Open(dir string, maxBytes int64) (*Cache, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("ipccache: size must be positive, got %d", maxBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("ipccache: create cache dir: %w", err)
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("ipccache: lock cache dir: %w", err)
	}
	if err := unix.Flock(int(lf.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lf.Close()
		return nil, fmt.Errorf("%w (%v)", ErrLocked, err)
	}
	c := &Cache{dir: dir, max: maxBytes, lock: lf, now: time.Now, items: map[string]*item{}, writing: map[string]bool{}}
	des, err := os.ReadDir(dir)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("ipccache: list cache dir: %w", err)
	}
	type found struct {
		name  string
		size  int64
		mtime time.Time
	}
	var fs []found
	for _, de := range des {
		n := de.Name()
		switch {
		case strings.HasPrefix(n, ".") && strings.HasSuffix(n, ".tmp"):
			_ = os.Remove(filepath.Join(dir, n))
		case strings.HasSuffix(n, entryExt) && de.Type().IsRegular():
			fi, err := de.Info()
			if err != nil {
				continue
			}
			fs = append(fs, found{strings.TrimSuffix(n, entryExt), fi.Size(), fi.ModTime()})
		}
	}
	// Most recently used first.
	sort.Slice(fs, func(i, j int) bool { return fs[i].mtime.After(fs[j].mtime) })
	c.mu.Lock()
	for _, f := range fs {
		it := &item{name: f.name, size: f.size, touched: f.mtime}
		it.elem = c.lru.PushBack(it)
		c.items[f.name] = it
		c.size += f.size
	}
	c.evictLocked()
	c.mu.Unlock()
	return c, nil
}

// Close releases the directory lock. Open entries stay readable.
func (c *Cache) Close() error {
	if c.lock == nil {
		return nil
	}
	err := c.lock.Close()
	c.lock = nil
	return err
}

// Dir is the cache directory.
func (c *Cache) Dir() string { return c.dir }

// Stats returns the counters.
func (c *Cache) Stats() Stats {
	c.mu.Lock()
	s := Stats{Bytes: c.size, Entries: len(c.items), MaxBytes: c.max}
	c.mu.Unlock()
	s.Hits, s.Misses, s.Fills = c.hits.Load(), c.misses.Load(), c.fills.Load()
	s.Evictions, s.Corrupt = c.evictions.Load(), c.corrupt.Load()
	s.HitBytes, s.FillBytes, s.EvictedBytes = c.hitBytes.Load(), c.fillBytes.Load(), c.evictedBytes.Load()
	return s
}

// Has reports whether the cache holds key (without counting a hit or a
// miss, and without checking it).
func (c *Cache) Has(key Key) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.items[key.name()] != nil
}

func (c *Cache) path(name string) string { return filepath.Join(c.dir, name+entryExt) }

// Get opens the entry of key for reading; nil on a miss. An entry that
// fails its checks (the first time this process opens it: the checksum of
// the whole file; every time: its size) is deleted and is a miss. The
// caller releases the entry.
func (c *Cache) Get(key Key) *Entry {
	name := key.name()
	c.mu.Lock()
	it := c.items[name]
	if it == nil {
		c.mu.Unlock()
		c.misses.Add(1)
		return nil
	}
	c.lru.MoveToFront(it.elem)
	pa := it.parsed
	touch := c.now().Sub(it.touched) > touchEvery
	if touch {
		it.touched = c.now()
	}
	c.mu.Unlock()

	e, err := c.openEntry(it, pa)
	if err != nil {
		c.drop(it, true)
		c.misses.Add(1)
		return nil
	}
	if touch {
		t := c.now()
		_ = os.Chtimes(c.path(name), t, t)
	}
	c.hits.Add(1)
	c.hitBytes.Add(uint64(e.size))
	return e
}

// openEntry opens an item's file and, the first time, checks and parses
// it.
func (c *Cache) openEntry(it *item, pa *parsed) (*Entry, error) {
	f, err := os.Open(c.path(it.name))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() || fi.Size() != it.size || fi.Size() < int64(len(magic))+trailerLen {
		f.Close()
		return nil, fmt.Errorf("%w: size %d, indexed %d", ErrCorrupt, fi.Size(), it.size)
	}
	if pa == nil {
		pa, err = parseEntry(f, fi.Size())
		if err != nil {
			f.Close()
			return nil, err
		}
		c.mu.Lock()
		it.parsed = pa
		c.mu.Unlock()
	}
	e := &Entry{f: f, size: fi.Size(), p: pa, c: c, it: it}
	e.refs.Store(1)
	return e, nil
}

// drop removes an item (and its file).
func (c *Cache) drop(it *item, corrupt bool) {
	c.mu.Lock()
	if c.items[it.name] == it {
		delete(c.items, it.name)
		c.lru.Remove(it.elem)
		c.size -= it.size
		_ = os.Remove(c.path(it.name))
	}
	c.mu.Unlock()
	if corrupt {
		c.corrupt.Add(1)
	}
}

// evictLocked removes the least recently used entries until the cache
// fits its size. Entries open for readers stay readable (their open file
// holds the removed file).
func (c *Cache) evictLocked() {
	for c.size > c.max {
		back := c.lru.Back()
		if back == nil {
			return
		}
		it := back.Value.(*item)
		c.lru.Remove(back)
		delete(c.items, it.name)
		c.size -= it.size
		_ = os.Remove(c.path(it.name))
		c.evictions.Add(1)
		c.evictedBytes.Add(uint64(it.size))
	}
}

// add publishes a finished entry.
func (c *Cache) add(name string, size int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.writing, name)
	if old := c.items[name]; old != nil {
		c.lru.Remove(old.elem)
		c.size -= old.size
	}
	it := &item{name: name, size: size, touched: c.now()}
	it.elem = c.lru.PushFront(it)
	c.items[name] = it
	c.size += size
	c.evictLocked()
	c.fills.Add(1)
	c.fillBytes.Add(uint64(size))
}

// readAt reads len(b) bytes at off, a short read an ErrCorrupt.
func readAt(f io.ReaderAt, b []byte, off int64) error {
	if _, err := f.ReadAt(b, off); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err // no server path in the message
		}
		return fmt.Errorf("%w: read at %d: %v", ErrCorrupt, off, err)
	}
	return nil
}

// parseEntry checks an entry's framing and checksum (of the whole file)
// and parses its schema and index.
func parseEntry(f io.ReaderAt, size int64) (*parsed, error) {
	var head [16]byte
	tr := make([]byte, trailerLen)
	if err := readAt(f, head[:], 0); err != nil {
		return nil, err
	}
	if err := readAt(f, tr, size-trailerLen); err != nil {
		return nil, err
	}
	if string(head[:len(magic)]) != magic || string(tr[trailerLen-8:]) != trailerMagic {
		return nil, fmt.Errorf("%w: bad magic", ErrCorrupt)
	}
	n := int64(binary.LittleEndian.Uint64(tr[0:]))
	rows := int64(binary.LittleEndian.Uint64(tr[8:]))
	sum := binary.LittleEndian.Uint32(tr[16:])
	if v := binary.LittleEndian.Uint32(tr[20:]); v != formatV {
		return nil, fmt.Errorf("%w: format version %d", ErrCorrupt, v)
	}
	h := crc32.New(castagnoli)
	if _, err := io.CopyBuffer(h, io.NewSectionReader(f, 0, size-16), make([]byte, 256<<10)); err != nil {
		return nil, fmt.Errorf("%w: read: %v", ErrCorrupt, err)
	}
	if h.Sum32() != sum {
		return nil, fmt.Errorf("%w: checksum mismatch", ErrCorrupt)
	}
	if n < 0 || n > size/indexRow {
		return nil, fmt.Errorf("%w: %d batches do not fit", ErrCorrupt, n)
	}
	idxStart := size - trailerLen - n*indexRow
	if idxStart < int64(len(head)) {
		return nil, fmt.Errorf("%w: %d batches do not fit", ErrCorrupt, n)
	}
	// The schema message at the start.
	if binary.LittleEndian.Uint32(head[8:]) != 0xFFFFFFFF {
		return nil, fmt.Errorf("%w: schema message framing", ErrCorrupt)
	}
	l := int64(int32(binary.LittleEndian.Uint32(head[12:])))
	if l <= 0 || l%8 != 0 || int64(len(head))+l > idxStart {
		return nil, fmt.Errorf("%w: schema message length %d", ErrCorrupt, l)
	}
	schemaMeta := make([]byte, l)
	if err := readAt(f, schemaMeta, int64(len(head))); err != nil {
		return nil, err
	}
	next := int64(len(head)) + l
	sc, err := parseSchema(schemaMeta)
	if err != nil {
		return nil, fmt.Errorf("%w: schema: %v", ErrCorrupt, err)
	}
	if hasDictionary(sc.Fields()) {
		return nil, fmt.Errorf("%w: dictionary fields", ErrCorrupt)
	}
	idx := make([]byte, n*indexRow)
	if err := readAt(f, idx, idxStart); err != nil {
		return nil, err
	}
	pa := &parsed{schema: sc, schemaMeta: schemaMeta, msgs: make([]Message, n)}
	var total int64
	for i := range n {
		row := idx[i*indexRow:]
		off := int64(binary.LittleEndian.Uint64(row[0:]))
		metaLen := int64(binary.LittleEndian.Uint32(row[8:]))
		padded := int64(binary.LittleEndian.Uint32(row[12:]))
		bodyLen := int64(binary.LittleEndian.Uint64(row[16:]))
		r := int64(binary.LittleEndian.Uint64(row[24:]))
		crc := binary.LittleEndian.Uint32(row[32:])
		if off != next || off%8 != 0 || metaLen > padded || padded%8 != 0 || bodyLen < 0 || r < 0 ||
			bodyLen > idxStart || off+8+padded+bodyLen > idxStart || metaLen == 0 {
			return nil, fmt.Errorf("%w: index row %d", ErrCorrupt, i)
		}
		pa.msgs[i] = Message{off: off, metaLen: metaLen, padded: padded, bodyLen: bodyLen, crc: crc, Rows: r}
		next = off + 8 + padded + bodyLen
		total += r
	}
	if next != idxStart || total != rows {
		return nil, fmt.Errorf("%w: index does not cover the messages", ErrCorrupt)
	}
	pa.rows = rows
	return pa, nil
}

func hasDictionary(fs []arrow.Field) bool {
	for _, f := range fs {
		if typeHasDictionary(f.Type) {
			return true
		}
	}
	return false
}

func typeHasDictionary(t arrow.DataType) bool {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		return true
	case arrow.NestedType:
		return hasDictionary(t.Fields())
	}
	return false
}

// Cacheable reports whether entries can hold batches of sc.
func Cacheable(sc *arrow.Schema) bool { return !hasDictionary(sc.Fields()) }
