package ipccache

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "name", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
}, func() *arrow.Metadata { m := arrow.NewMetadata([]string{"k"}, []string{"v"}); return &m }())

func testBatch(mem memory.Allocator, start, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testSchema)
	defer b.Release()
	for i := start; i < start+n; i++ {
		b.Field(0).(*array.Int64Builder).Append(int64(i))
		if i%3 == 0 {
			b.Field(1).AppendNull()
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("n%d", i))
		}
		lb := b.Field(2).(*array.ListBuilder)
		lb.Append(true)
		lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprintf("t%d", i%5))
	}
	return b.NewRecordBatch()
}

func fill(t *testing.T, c *Cache, key Key, batches ...[2]int) {
	t.Helper()
	w, err := c.Create(key, testSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range batches {
		rec := testBatch(memory.DefaultAllocator, b[0], b[1])
		err := w.Write(rec)
		rec.Release()
		if err != nil {
			w.Abort()
			t.Fatal(err)
		}
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

// TestRoundTrip: an entry's batches read back equal, decoded (zero-copy)
// and as raw messages a Flight reader accepts; the entry survives a
// reopen of the cache.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	k := KeyOf("a", "v0/0.parquet", "sha")
	fill(t, c, k, [2]int{0, 10}, [2]int{10, 7}, [2]int{17, 0})
	if _, err := c.Create(k, testSchema); !errors.Is(err, ErrBusy) {
		t.Fatalf("second create: %v", err)
	}
	check := func(c *Cache) {
		t.Helper()
		mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
		defer mem.AssertSize(t, 0)
		e := c.Get(k)
		if e == nil {
			t.Fatal("miss")
		}
		defer e.Release()
		if e.Rows() != 17 || e.NumBatches() != 3 || !e.Schema().Equal(testSchema) {
			t.Fatalf("rows %d batches %d schema %v", e.Rows(), e.NumBatches(), e.Schema())
		}
		r, err := e.Reader(mem)
		if err != nil {
			t.Fatal(err)
		}
		i := 0
		want := [][2]int{{0, 10}, {10, 7}, {17, 0}}
		for r.Next() {
			exp := testBatch(mem, want[i][0], want[i][1])
			if !array.RecordEqual(exp, r.RecordBatch()) {
				t.Errorf("batch %d differs", i)
			}
			exp.Release()
			i++
		}
		if r.Err() != nil || i != 3 {
			t.Fatalf("read %d batches: %v", i, r.Err())
		}
		r.Release()
		// The raw messages, as DoGet sends them, after a schema message.
		var msgs []*flight.FlightData
		sp := ipc.GetSchemaPayload(testSchema, mem)
		m := sp.Meta()
		msgs = append(msgs, &flight.FlightData{DataHeader: bytes.Clone(m.Bytes())})
		m.Release()
		sp.Release()
		for i := range e.NumBatches() {
			meta, body, rows, err := e.Batch(i)
			if err != nil {
				t.Fatal(err)
			}
			if rows != int64(want[i][1]) {
				t.Errorf("batch %d rows %d", i, rows)
			}
			msgs = append(msgs, &flight.FlightData{DataHeader: meta, DataBody: body})
		}
		fr, err := flight.NewRecordReader(&fakeStream{msgs: msgs}, ipc.WithAllocator(mem))
		if err != nil {
			t.Fatal(err)
		}
		i = 0
		for fr.Next() {
			exp := testBatch(mem, want[i][0], want[i][1])
			if !array.RecordEqual(exp, fr.RecordBatch()) {
				t.Errorf("raw batch %d differs", i)
			}
			exp.Release()
			i++
		}
		if fr.Err() != nil || i != 3 {
			t.Fatalf("raw: %d batches, %v", i, fr.Err())
		}
		fr.Release()
	}
	check(c)
	if s := c.Stats(); s.Hits != 1 || s.Fills != 1 || s.Entries != 1 || s.Bytes <= 0 {
		t.Errorf("stats %+v", s)
	}
	if _, err := Open(dir, 1<<30); !errors.Is(err, ErrLocked) {
		t.Errorf("second open: %v", err)
	}
	c.Close()
	c2, err := Open(dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	check(c2)
	if c2.Get(KeyOf("other")) != nil {
		t.Error("hit on a key never filled")
	}
}

type fakeStream struct{ msgs []*flight.FlightData }

func (f *fakeStream) Recv() (*flight.FlightData, error) {
	if len(f.msgs) == 0 {
		return nil, io.EOF
	}
	m := f.msgs[0]
	f.msgs = f.msgs[1:]
	return m, nil
}

// TestCorruptIsMiss: an entry damaged in any way is a miss, is deleted,
// and is counted; a temp file a killed writer left is removed at Open.
func TestCorruptIsMiss(t *testing.T) {
	damage := []struct {
		name string
		f    func([]byte) []byte
	}{
		{"flipped byte", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"truncated", func(b []byte) []byte { return b[:len(b)-5] }},
		{"empty", func([]byte) []byte { return nil }},
		{"trailer only", func(b []byte) []byte { return b[len(b)-trailerLen:] }},
		{"zeros", func(b []byte) []byte { return make([]byte, len(b)) }},
	}
	for _, d := range damage {
		t.Run(d.name, func(t *testing.T) {
			dir := t.TempDir()
			c, err := Open(dir, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			k := KeyOf(d.name)
			fill(t, c, k, [2]int{0, 100})
			c.Close()
			p := filepath.Join(dir, k.name()+entryExt)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, d.f(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dir, ".x.123.tmp"), []byte("partial"), 0o600); err != nil {
				t.Fatal(err)
			}
			c, err = Open(dir, 1<<30)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := os.Stat(filepath.Join(dir, ".x.123.tmp")); !os.IsNotExist(err) {
				t.Errorf("temp kept: %v", err)
			}
			if e := c.Get(k); e != nil {
				e.Release()
				t.Fatal("corrupt entry served")
			}
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("corrupt entry kept: %v", err)
			}
			if s := c.Stats(); s.Misses != 1 || s.Entries != 0 || s.Corrupt != 1 {
				t.Errorf("stats %+v", s)
			}
			// It can be filled again.
			fill(t, c, k, [2]int{0, 3})
			e := c.Get(k)
			if e == nil || e.Rows() != 3 {
				t.Fatal("refill not served")
			}
			e.Release()
		})
	}
}

// TestEvictLRU: the cache stays under its size, evicting the least
// recently used entry; an entry open for a reader stays readable.
func TestEvictLRU(t *testing.T) {
	dir := t.TempDir()
	c, err := Open(dir, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	fill(t, c, KeyOf("probe"), [2]int{0, 1000})
	one := c.Stats().Bytes
	c.Close()
	os.RemoveAll(dir)
	c, err = Open(dir, 3*one+one/2)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	keys := []Key{KeyOf("0"), KeyOf("1"), KeyOf("2"), KeyOf("3")}
	for _, k := range keys[:3] {
		fill(t, c, k, [2]int{0, 1000})
	}
	held := c.Get(keys[0]) // 0 is now the most recent; 1 the least
	if held == nil {
		t.Fatal("miss")
	}
	fill(t, c, keys[3], [2]int{0, 1000})
	if c.Has(keys[1]) || !c.Has(keys[0]) || !c.Has(keys[2]) || !c.Has(keys[3]) {
		t.Fatalf("wrong eviction: %v %v %v %v", c.Has(keys[0]), c.Has(keys[1]), c.Has(keys[2]), c.Has(keys[3]))
	}
	// Evict the held entry too: it stays readable.
	for i := 4; i < 8; i++ {
		fill(t, c, KeyOf(fmt.Sprint(i)), [2]int{0, 1000})
	}
	if c.Has(keys[0]) {
		t.Fatal("not evicted")
	}
	r, err := held.Reader(memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for r.Next() {
		n += int(r.RecordBatch().NumRows())
	}
	r.Release()
	held.Release()
	if n != 1000 {
		t.Fatalf("read %d rows from an evicted, held entry", n)
	}
	s := c.Stats()
	if s.Bytes > 3*one+one/2 || s.Evictions != 5 || s.Entries != 3 {
		t.Errorf("stats %+v (one entry %d bytes)", s, one)
	}
	// Too large for the cache: refused while writing, nothing left.
	w, err := c.Create(KeyOf("big"), testSchema)
	if err != nil {
		t.Fatal(err)
	}
	rec := testBatch(memory.DefaultAllocator, 0, 5000)
	err = w.Write(rec)
	rec.Release()
	if err == nil {
		err = w.Commit()
	} else {
		w.Abort()
	}
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("big entry: %v", err)
	}
	des, _ := os.ReadDir(dir)
	for _, de := range des {
		if strings.HasSuffix(de.Name(), ".tmp") {
			t.Errorf("temp left: %s", de.Name())
		}
	}
}

func TestDictionaryRefused(t *testing.T) {
	c, err := Open(t.TempDir(), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc := arrow.NewSchema([]arrow.Field{{Name: "d", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}}}, nil)
	if _, err := c.Create(KeyOf("d"), sc); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("dictionary schema: %v", err)
	}
}

// TestChangedUnderReader: an entry truncated, or rewritten in place with
// its size and time kept, after the process has opened (and checked) it
// once fails the reads that meet the change with ErrCorrupt — never a
// crash, never the changed bytes — and is dropped; the cache goes on
// (the entry fills and serves again). The changes are made while a reader
// holds the entry and between two opens of it.
func TestChangedUnderReader(t *testing.T) {
	changes := []struct {
		name   string
		change func(t *testing.T, p string)
	}{
		{"truncated", func(t *testing.T, p string) {
			if err := os.Truncate(p, 4096); err != nil {
				t.Fatal(err)
			}
		}},
		{"emptied", func(t *testing.T, p string) {
			if err := os.Truncate(p, 0); err != nil {
				t.Fatal(err)
			}
		}},
		{"rewritten", func(t *testing.T, p string) {
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			i := bytes.Index(b, []byte("n2000"))
			if i < 0 {
				t.Fatal("value not found in the entry")
			}
			copy(b[i:], "ZZ")
			f, err := os.OpenFile(p, os.O_WRONLY, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt(b, 0); err != nil {
				t.Fatal(err)
			}
			f.Close()
			if err := os.Chtimes(p, st.ModTime(), st.ModTime()); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, ch := range changes {
		for _, held := range []bool{true, false} {
			name := ch.name + "/reopened"
			if held {
				name = ch.name + "/held"
			}
			t.Run(name, func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.DefaultAllocator)
				defer mem.AssertSize(t, 0)
				dir := t.TempDir()
				c, err := Open(dir, 1<<30)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				k := KeyOf(name)
				fill(t, c, k, [2]int{0, 1000}, [2]int{1000, 2000}, [2]int{3000, 1000})
				p := filepath.Join(dir, k.name()+entryExt)
				e := c.Get(k) // checked and parsed
				if e == nil {
					t.Fatal("miss")
				}
				if _, _, _, err := e.Batch(0); err != nil {
					t.Fatal(err)
				}
				if !held {
					e.Release()
				}
				ch.change(t, p)
				if !held {
					e = c.Get(k)
					if e == nil {
						// Seen at open (a size that changed): a miss, dropped.
						if c.Has(k) || c.Stats().Corrupt != 1 {
							t.Fatalf("changed entry kept: %+v", c.Stats())
						}
						refill(t, c, k)
						return
					}
				}
				// Every batch read fails or is the original; the changed
				// one fails.
				failed := false
				for i := range e.NumBatches() {
					rec, err := e.ReadBatch(i, mem)
					if err != nil {
						if !errors.Is(err, ErrCorrupt) {
							t.Fatalf("batch %d: %v", i, err)
						}
						failed = true
						continue
					}
					want := [][2]int{{0, 1000}, {1000, 2000}, {3000, 1000}}[i]
					exp := testBatch(mem, want[0], want[1])
					if !array.RecordEqual(exp, rec) {
						t.Errorf("batch %d: changed bytes served", i)
					}
					exp.Release()
					rec.Release()
				}
				if !failed {
					t.Fatal("no read saw the change")
				}
				// The reader path too.
				r, err := e.Reader(mem)
				if err != nil {
					t.Fatal(err)
				}
				for r.Next() {
				}
				if !errors.Is(r.Err(), ErrCorrupt) {
					t.Errorf("reader: %v", r.Err())
				}
				r.Release()
				e.Release()
				if c.Has(k) || c.Stats().Corrupt == 0 {
					t.Fatalf("changed entry kept: %+v", c.Stats())
				}
				refill(t, c, k)
			})
		}
	}
}

// refill fills k again and reads it back whole.
func refill(t *testing.T, c *Cache, k Key) {
	t.Helper()
	fill(t, c, k, [2]int{0, 5})
	e := c.Get(k)
	if e == nil {
		t.Fatal("refill not served")
	}
	defer e.Release()
	rec, err := e.ReadBatch(0, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	exp := testBatch(memory.DefaultAllocator, 0, 5)
	defer exp.Release()
	if !array.RecordEqual(exp, rec) {
		t.Fatal("refill differs")
	}
}
