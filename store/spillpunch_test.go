package store

// The spill gives back the space of the chunks whose blocks are all
// replayed (spill.count), while it goes on writing others: a chunk
// punched too soon would turn rows not yet encoded into zeros.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sys/unix"
	"pgregory.net/rapid"

	"github.com/quiverdb/quiver/store/codec"
)

// TestSpillPunchKeepsLiveRows: blocks of random sizes for random
// partitions, written and replayed (a partition at a time, early or at
// the end, or as the spill's bound picks them) in a random interleaving,
// with chunks of a few KiB: every partition's rows come back as written,
// in order; after each block the file holds no more than its bound; and
// once all are replayed it holds no more than its last, partly written
// chunk.
func TestSpillPunchKeepsLiveRows(t *testing.T) {
	orig, origSlack := spillChunk, spillSlack
	t.Cleanup(func() { spillChunk, spillSlack = orig, origSlack })
	dir := t.TempDir()
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}, {Name: "s", Type: arrow.BinaryTypes.String}}, nil)
	rapid.Check(t, func(rt *rapid.T) {
		spillChunk = int64(rapid.SampledFrom([]int{4096, 8192, 65536}).Draw(rt, "chunk"))
		spillSlack = int64(rapid.SampledFrom([]int{0, 16 << 10, 1 << 30}).Draw(rt, "slack"))
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		sp, err := openSpill(dir, mem)
		if err != nil {
			rt.Fatal(err)
		}
		defer sp.Close()
		nparts := rapid.IntRange(1, 6).Draw(rt, "parts")
		written := make([][]int64, nparts) // values not yet replayed, by partition
		var replayed [][]int64 = make([][]int64, nparts)
		var want [][]int64 = make([][]int64, nparts)
		next := int64(0)
		// collect takes the rows of a replayed batch (its one part's).
		collect := func(g *codec.Grouped) error {
			defer g.Data.Release()
			var i int
			if _, err := fmt.Sscanf(g.Parts[0].Dir, "k=%d", &i); err != nil {
				return err
			}
			v := g.Data.Column(0).(*array.Int64)
			s := g.Data.Column(1).(*array.String)
			for j := 0; j < v.Len(); j++ {
				if s.Value(j) != pad(v.Value(j)) {
					return fmt.Errorf("partition %d: row %d: %q beside %d", i, j, s.Value(j), v.Value(j))
				}
				replayed[i] = append(replayed[i], v.Value(j))
			}
			return nil
		}
		replay := func(i int) {
			p := sp.byDir[fmt.Sprintf("k=%d", i)]
			if p == nil {
				return
			}
			if err := sp.replayPart(context.Background(), p, spillSize{rows: int64(rapid.IntRange(1, 500).Draw(rt, "batch")), bytes: 1 << 30}, collect); err != nil {
				rt.Fatal(err)
			}
			written[i] = nil
		}
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for range steps {
			i := rapid.IntRange(0, nparts-1).Draw(rt, "part")
			if rapid.IntRange(0, 3).Draw(rt, "op") == 0 {
				replay(i)
				continue
			}
			n := rapid.IntRange(1, 300).Draw(rt, "rows")
			vb := array.NewInt64Builder(mem)
			sb := array.NewStringBuilder(mem)
			for range n {
				vb.Append(next)
				sb.Append(pad(next))
				written[i] = append(written[i], next)
				want[i] = append(want[i], next)
				next++
			}
			cols := []arrow.Array{vb.NewArray(), sb.NewArray()}
			rec := array.NewRecordBatch(sc, cols, int64(n))
			cols[0].Release()
			cols[1].Release()
			vb.Release()
			sb.Release()
			err := sp.block(codec.Part{Dir: fmt.Sprintf("k=%d", i), Values: map[string]string{"k": fmt.Sprint(i)}}, rec)
			rec.Release()
			if err != nil {
				rt.Fatal(err)
			}
			// The spill's bound (after each batch, as start calls it)
			// replays whole partitions of its own choosing.
			if err := sp.bound(context.Background(), spillSize{rows: 1 << 20, bytes: 1 << 30}, collect); err != nil {
				rt.Fatal(err)
			}
			if bound := max(spillSlack, spillHeldRatio*sp.waiting()) + spillChunk; !sp.noPunch && sp.held() > bound {
				rt.Fatalf("the spill holds %d bytes, %d waiting: more than %d", sp.held(), sp.waiting(), bound)
			}
		}
		for i := range nparts {
			replay(i)
		}
		for i := range nparts {
			if !slices.Equal(replayed[i], want[i]) {
				rt.Fatalf("partition %d: replayed %v, wrote %v", i, replayed[i], want[i])
			}
		}
		var st unix.Stat_t
		if err := unix.Fstat(sp.fd, &st); err != nil {
			rt.Fatal(err)
		}
		if held := st.Blocks * 512; !sp.noPunch && held > spillChunk+4096 {
			rt.Fatalf("%d bytes held after every block was replayed (%d written, chunks of %d)", held, sp.end, spillChunk)
		}
		mem.AssertSize(rt, 0)
	})
}

// pad is a row's string: long enough that blocks span chunks.
func pad(v int64) string { return fmt.Sprintf("%d-%0*d", v, 8+int(v%23), v) }

// TestSpillDamageIsNotTheClients: a block the spill cannot read back (here
// punched out while it waits, as a bug would) fails the put as the
// server's: its error names the spill and carries no io.EOF, which the
// Flight server takes for the client's stream ending early
// (INVALID_ARGUMENT, and no cause in the log).
func TestSpillDamageIsNotTheClients(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	sp, err := openSpill(t.TempDir(), mem)
	if err != nil {
		t.Fatal(err)
	}
	defer sp.Close()
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	b := array.NewInt64Builder(mem)
	for i := range 100_000 {
		b.Append(int64(i))
	}
	col := b.NewArray()
	b.Release()
	rec := array.NewRecordBatch(sc, []arrow.Array{col}, int64(col.Len()))
	col.Release()
	err = sp.block(codec.Part{Dir: "k=1"}, rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.bw.Flush(); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fallocate(sp.fd, unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 0, 1<<20); err != nil {
		t.Skipf("cannot punch a hole here: %v", err)
	}
	err = sp.replayPart(context.Background(), sp.parts[0], spillSize{rows: 1 << 20, bytes: 1 << 30}, func(g *codec.Grouped) error {
		g.Data.Release()
		return nil
	})
	if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || !strings.Contains(err.Error(), "spill") {
		t.Fatalf("replaying a damaged block: %v; want a spill error without io.EOF in its chain", err)
	}
	mem.AssertSize(t, 0)
}
