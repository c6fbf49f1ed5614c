package store

import (
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"
)

// skewedPart is the partition of row id of a skewed put: most rows in
// partition 0, every 16th in one of parts-1 small partitions, so that
// every batch gives a few rows to each.
func skewedPart(id int64, parts int) int64 {
	if id%16 != 0 {
		return 0
	}
	return 1 + (id/16)%int64(parts-1)
}

// skewed is a reader of batches batches of rows rows (ids from 0, column
// k by skewedPart, a pad of padBytes).
func skewed(batches, rows, parts, padBytes int) array.RecordReader {
	return padRows(batches, rows, padBytes, func(id int64, _ int) int64 { return skewedPart(id, parts) }, nil)
}

// TestSpillBoundedUnderSkew: a partitioned write whose small partitions
// get a few rows of every batch (they never reach a row group's rows
// while the large one replays again and again) holds no more spill space
// than spillSlack or spillHeldRatio times what waits to be encoded,
// where it held the whole put's (no chunk came free while a small
// partition's block was in it); every row is written once, in its
// partition, in the order sent.
func TestSpillBoundedUnderSkew(t *testing.T) {
	defer func(c, s int64) { spillChunk, spillSlack = c, s }(spillChunk, spillSlack)
	spillChunk, spillSlack = 64<<10, 1<<20
	var maxHeld, written int64
	spillHeldHook = func(held, waiting, w int64) {
		maxHeld, written = max(maxHeld, held), w
		if bound := max(spillSlack, spillHeldRatio*waiting) + spillChunk; held > bound {
			t.Errorf("after a batch the spill holds %d bytes, %d of them waiting: more than %d", held, waiting, bound)
		}
	}
	defer func() { spillHeldHook = nil }()
	const batches, rows, parts = 400, 1000, 16
	s, dir := newTestStore(t)
	c := put(t, s, ModeWrite, []string{"skew"}, skewed(batches, rows, parts, 100), PutOptions{PartitionBy: []string{"k"}})
	if written < 40<<20 {
		t.Fatalf("the spill wrote %d bytes; the test needs more than 40 MiB", written)
	}
	// (The large partition waits for up to a row group's rows, 4 MiB
	// here, and the file may hold spillHeldRatio times what waits.)
	if maxHeld > written/4 {
		t.Errorf("the spill held %d bytes of the %d it wrote; want a bound that does not grow with the put", maxHeld, written)
	}
	groups := 0
	for i, rows := range rowGroupRows(t, dir, []string{"skew"}, c) {
		if !strings.Contains(c.Files[i].Path, "k=0/") {
			groups += len(rows)
		}
	}
	if groups <= parts-1 {
		t.Errorf("the small partitions have %d row groups; want more than one each (replayed before they reached a row group's rows)", groups)
	}
	checkPartitioned(t, s, []string{"skew"}, batches*rows, func(id int64) int64 { return skewedPart(id, parts) })
	if n := s.PutMemory(); n != 0 {
		t.Errorf("put memory after the put: %d", n)
	}
}

// TestSpillSkipsRowsThatCompleteARowGroup: a partition whose rows of a
// batch bring its waiting rows to a row group's (spillEarly) has them
// encoded as they are, after its waiting rows, without writing them to
// the spill and reading them back: a skewed write whose large partition
// gets more than a row group's rows in every batch spills little more
// than its small partitions' rows, and its row groups are as before (the
// large partition's a batch's rows each); every row once, in order.
func TestSpillSkipsRowsThatCompleteARowGroup(t *testing.T) {
	var written int64
	spillHeldHook = func(_, _, w int64) { written = w }
	defer func() { spillHeldHook = nil }()
	rows := int(spillEarly.rows) * 5 / 4 // partition 0: 15/16 of them, more than spillEarly
	const batches, parts = 8, 16
	s, dir := newTestStore(t)
	c := put(t, s, ModeWrite, []string{"skip"}, skewed(batches, rows, parts, 100), PutOptions{PartitionBy: []string{"k"}})
	total := int64(batches*rows) * 120 // (about: 100 bytes of pad, two int64s, an offset)
	if written > total/8 {
		t.Errorf("the spill wrote %d bytes of about %d; want little more than the small partitions' sixteenth", written, total)
	}
	for i, groups := range rowGroupRows(t, dir, []string{"skip"}, c) {
		if strings.Contains(c.Files[i].Path, "k=0/") {
			for _, n := range groups {
				if n != int64(rows)*15/16 {
					t.Errorf("%s: row groups of %v rows; want a batch's rows of partition 0 each (%d)", c.Files[i].Path, groups, rows*15/16)
					break
				}
			}
		}
	}
	checkPartitioned(t, s, []string{"skip"}, batches*rows, func(id int64) int64 { return skewedPart(id, parts) })
}
