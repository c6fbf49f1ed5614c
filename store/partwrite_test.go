package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/codec"
)

// partKey is one row's partition value for partSource: null, or a value.
type partKey struct {
	null bool
	v    string // the value (an int64's decimal text for int64 keys)
}

// partSource builds batches of (id int64, k, pad string) whose k (int64,
// string, or dictionary<int32, string>) is keys[b][i] for row i of batch
// b; ids count up from 0 over the whole put.
func partSource(t *testing.T, kt arrow.DataType, keys [][]partKey, padBytes int) (*arrow.Schema, []arrow.RecordBatch) {
	t.Helper()
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "k", Type: kt, Nullable: true},
		{Name: "pad", Type: arrow.BinaryTypes.String},
	}, nil)
	pad := strings.Repeat("x", padBytes)
	var recs []arrow.RecordBatch
	id := int64(0)
	for _, batch := range keys {
		b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
		for _, k := range batch {
			b.Field(0).(*array.Int64Builder).Append(id)
			id++
			switch kb := b.Field(1).(type) {
			case *array.Int64Builder:
				if k.null {
					kb.AppendNull()
				} else {
					var n int64
					if _, err := fmt.Sscan(k.v, &n); err != nil {
						t.Fatal(err)
					}
					kb.Append(n)
				}
			case *array.StringBuilder:
				if k.null {
					kb.AppendNull()
				} else {
					kb.Append(k.v)
				}
			case *array.BinaryDictionaryBuilder:
				if k.null {
					kb.AppendNull()
				} else if err := kb.AppendString(k.v); err != nil {
					t.Fatal(err)
				}
			default:
				t.Fatalf("key builder %T", kb)
			}
			b.Field(2).(*array.StringBuilder).Append(pad)
		}
		recs = append(recs, b.NewRecordBatch())
		b.Release()
	}
	return sc, recs
}

// expectedParts is the row-by-row answer: each id's partition directory,
// from codec.PartitionDir of the row's own value.
func expectedParts(t *testing.T, keys [][]partKey) []string {
	t.Helper()
	var want []string
	for _, batch := range keys {
		for _, k := range batch {
			dir, err := codec.PartitionDir([]string{"k"}, []string{k.v}, []bool{k.null})
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, dir)
		}
	}
	return want
}

// checkParts reads profile keys back and checks that every id is there
// once, under the partition the row-by-row answer gives it, that each
// partition's ids are in the order they were put, and that the commit
// record's files cover exactly the partitions expected.
func checkParts(t *testing.T, s *Store, profile []string, c *CommitRecord, want []string) {
	t.Helper()
	rdr, err := s.Read(context.Background(), profile, ReadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rdr.Release()
	got := make([]string, len(want))
	last := map[string]int64{}
	for rdr.Next() {
		rec := rdr.RecordBatch()
		ids := rec.Column(rec.Schema().FieldIndices("id")[0]).(*array.Int64)
		ks := rec.Column(rec.Schema().FieldIndices("k")[0])
		for i := range ids.Len() {
			id := ids.Value(i)
			if id < 0 || id >= int64(len(want)) || got[id] != "" {
				t.Fatalf("id %d out of range or read twice", id)
			}
			v, ok := codec.FormatPartValue(ks, i)
			dir, err := codec.PartitionDir([]string{"k"}, []string{v}, []bool{!ok})
			if err != nil {
				t.Fatal(err)
			}
			got[id] = dir
			if l, seen := last[dir]; seen && l > id {
				t.Fatalf("partition %s: id %d after %d", dir, id, l)
			}
			last[dir] = id
		}
	}
	if err := rdr.Err(); err != nil {
		t.Fatal(err)
	}
	for id := range want {
		if got[id] != want[id] {
			t.Fatalf("id %d: partition %q, want %q", id, got[id], want[id])
		}
	}
	dirs := map[string]bool{}
	var rows int64
	for _, f := range c.Files {
		v := f.Partition["k"]
		dir, err := codec.PartitionDir([]string{"k"}, []string{v}, []bool{v == codec.HiveDefault})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(f.Path, "/"+dir+"/") {
			t.Errorf("file %s of partition %s", f.Path, dir)
		}
		dirs[dir] = true
		rows += f.Rows
	}
	wantDirs := map[string]bool{}
	for _, d := range want {
		wantDirs[d] = true
	}
	for d := range wantDirs {
		if !dirs[d] {
			t.Errorf("no file in partition %s", d)
		}
		delete(dirs, d)
	}
	if len(dirs) > 0 {
		t.Errorf("files in partitions no row has: %v", dirs)
	}
	if rows != int64(len(want)) || c.Rows != int64(len(want)) {
		t.Errorf("files hold %d rows, record %d, want %d", rows, c.Rows, len(want))
	}
}

// TestPartitionedPutParallelWrites: the partitions of each batch are
// written to their files on every core (writeParts), their bookkeeping
// (evicting files over the budget mid-batch, rolling over at
// TargetFileBytes, holding small partitions' rows) staying serial; every
// row lands in the partition a row-by-row split gives it, in order, with
// adversarial keys and batch shapes.
func TestPartitionedPutParallelWrites(t *testing.T) {
	ints := func(batches, rows, parts int) [][]partKey {
		out := make([][]partKey, batches)
		for b := range out {
			for i := range rows {
				out[b] = append(out[b], partKey{v: fmt.Sprint((b*rows + i) % parts)})
			}
		}
		return out
	}
	dict := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}
	escaped := []string{"a/b", "c d", "100%", "x=y", "ünï", "..", "a\\b", "?#&", "tab\there", "\u00e9"}
	for _, tc := range []struct {
		name     string
		kt       arrow.DataType
		keys     [][]partKey
		pad      int
		budget   int64 // WithPutMemory (0: the default)
		target   int64 // TargetFileBytes
		minFiles int
	}{
		{name: "one partition", kt: arrow.PrimitiveTypes.Int64, keys: ints(3, 20_000, 1), pad: 16},
		{name: "64 partitions, parts written", kt: arrow.PrimitiveTypes.Int64, keys: ints(4, 64*600, 64), pad: 100},
		{name: "parts past the parallel-column threshold", kt: arrow.PrimitiveTypes.Int64, keys: ints(2, 3*10_000, 3), pad: 8},
		{name: "many partitions, held", kt: arrow.PrimitiveTypes.Int64, keys: ints(3, 3000, 1500), pad: 8},
		{name: "budget evicts files mid-batch", kt: arrow.PrimitiveTypes.Int64, keys: ints(5, 40*400, 40), pad: 200, budget: 256 << 10, minFiles: 41},
		{name: "roll over at TargetFileBytes", kt: arrow.PrimitiveTypes.Int64, keys: ints(6, 8*2000, 8), pad: 300, target: 1, minFiles: 6 * 8},
		{name: "null keys", kt: arrow.PrimitiveTypes.Int64, keys: func() [][]partKey {
			k := ints(3, 9000, 5)
			for b := range k {
				for i := range k[b] {
					if i%3 == 0 {
						k[b][i] = partKey{null: true}
					}
				}
			}
			return k
		}(), pad: 64},
		{name: "all null", kt: arrow.BinaryTypes.String, keys: [][]partKey{slices.Repeat([]partKey{{null: true}}, 5000)}, pad: 8},
		{name: "values that need escaping", kt: arrow.BinaryTypes.String, keys: func() [][]partKey {
			var k [][]partKey
			for b := range 3 {
				var batch []partKey
				for i := range 10_000 {
					batch = append(batch, partKey{v: escaped[(b+i)%len(escaped)]})
				}
				k = append(k, batch)
			}
			return k
		}(), pad: 32},
		{name: "dictionary keys", kt: dict, keys: func() [][]partKey {
			var k [][]partKey
			for b := range 3 {
				var batch []partKey
				for i := range 12_000 {
					if i%97 == 0 {
						batch = append(batch, partKey{null: true})
					} else {
						batch = append(batch, partKey{v: fmt.Sprintf("d%d", (i*7+b)%13)})
					}
				}
				k = append(k, batch)
			}
			return k
		}(), pad: 40},
		{name: "empty and one-row batches", kt: arrow.PrimitiveTypes.Int64, keys: [][]partKey{
			{}, {{v: "1"}}, {}, {{v: "2"}}, {{null: true}}, {}, {{v: "1"}}, ints(1, 20_000, 4)[0], {}, {{v: "3"}},
		}, pad: 128},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, spill := range []bool{false, true} {
				t.Run(map[bool]string{false: "as rows come", true: "spilled"}[spill], func(t *testing.T) {
					testPartitionedPut(t, tc.kt, tc.keys, tc.pad, tc.budget, tc.target, tc.minFiles, spill)
				})
			}
		})
	}
}

// testPartitionedPut writes keys (batches of partition keys of type kt,
// each row padded by pad bytes) partitioned, and checks every row is read
// back in its partition, in order, from at least minFiles files (when not
// spilled: a spilled write's files are those of its replayed batches).
func testPartitionedPut(t *testing.T, kt arrow.DataType, keys [][]partKey, pad int, budget, target int64, minFiles int, spill bool) {
	var opts []Option
	if budget > 0 {
		opts = append(opts, WithPutMemory(budget))
	}
	if !spill {
		opts = append(opts, WithSpillDir(SpillOff))
	}
	s, _ := newTestStore(t, opts...)
	sc, recs := partSource(t, kt, keys, pad)
	rdr, err := array.NewRecordReader(sc, recs)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		r.Release()
	}
	c := put(t, s, ModeWrite, []string{"p"}, rdr, PutOptions{PartitionBy: []string{"k"}, TargetFileBytes: target})
	checkParts(t, s, []string{"p"}, c, expectedParts(t, keys))
	if !spill && len(c.Files) < minFiles {
		t.Errorf("%d files, want at least %d", len(c.Files), minFiles)
	}
	if n := s.PutMemory(); n != 0 {
		t.Errorf("put memory after the put: %d", n)
	}
}

// TestPartitionedPutParallelRandom: random batches (sizes from 0 up, keys
// from a pool with nulls, skewed so that some partitions are held and
// others written) under random budgets and file targets, against the
// row-by-row answer.
func TestPartitionedPutParallelRandom(t *testing.T) {
	rounds := 12
	if testing.Short() {
		rounds = 3
	}
	for round := range rounds {
		r := rand.New(rand.NewPCG(uint64(round), 14))
		nparts := 1 + r.IntN(300)
		var keys [][]partKey
		for range 1 + r.IntN(6) {
			n := []int{0, 1, r.IntN(100), r.IntN(20_000)}[r.IntN(4)]
			batch := make([]partKey, n)
			for i := range batch {
				switch {
				case r.IntN(50) == 0:
					batch[i] = partKey{null: true}
				case r.IntN(2) == 0:
					batch[i] = partKey{v: fmt.Sprint(r.IntN(min(nparts, 4)))} // a few large partitions
				default:
					batch[i] = partKey{v: fmt.Sprint(r.IntN(nparts))}
				}
			}
			keys = append(keys, batch)
		}
		budget := []int64{0, 128 << 10, 1 << 20}[r.IntN(3)]
		target := []int64{0, 0, 32 << 10}[r.IntN(3)]
		t.Run(fmt.Sprintf("round %d: %d partitions, budget %d, target %d", round, nparts, budget, target), func(t *testing.T) {
			var opts []Option
			if budget > 0 {
				opts = append(opts, WithPutMemory(budget))
			}
			s, _ := newTestStore(t, opts...)
			sc, recs := partSource(t, arrow.PrimitiveTypes.Int64, keys, r.IntN(200))
			rdr, err := array.NewRecordReader(sc, recs)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				rec.Release()
			}
			want := expectedParts(t, keys)
			if len(want) == 0 {
				rdr.Release()
				return // (an empty put is another test's)
			}
			c := put(t, s, ModeWrite, []string{"p"}, rdr, PutOptions{PartitionBy: []string{"k"}, TargetFileBytes: target})
			checkParts(t, s, []string{"p"}, c, want)
			if n := s.PutMemory(); n != 0 {
				t.Errorf("put memory after the put: %d", n)
			}
		})
	}
}
