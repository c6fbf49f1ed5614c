package main

import (
	"bytes"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/internal/arrowtest"
)

// floatDictBatch is one row of sc's float64 dictionary column holding
// bits.
func floatDictBatch(mem memory.Allocator, sc *arrow.Schema, bits uint64) arrow.RecordBatch {
	col := arrowtest.FloatDictionary(mem, sc.Field(0).Type.(*arrow.DictionaryType), bits, 1)
	defer col.Release()
	return array.NewRecordBatch(sc, []arrow.Array{col}, 1)
}

// TestGetArrowSinksFloatDictionaries: `quiver get --format arrows` writes
// batches whose float dictionaries differ only in the sign of zero, a NaN
// payload or by less than 1e-5 each with its own values (arrow-go's IPC
// writer skipped them as sent already: 0.0 read back as -0.0), and
// `--format arrow`, whose file holds one dictionary per column, refuses
// them with a hint instead of writing the first batch's values for all.
func TestGetArrowSinksFloatDictionaries(t *testing.T) {
	dt := &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.PrimitiveTypes.Float64}
	sc := arrow.NewSchema([]arrow.Field{{Name: "v", Type: dt, Nullable: true}}, nil)
	sent := []uint64{0, 1 << 63, math.Float64bits(1), math.Float64bits(1.000001), 0x7FF8000000000001, 0x7FF8000000000002}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	write := func(format string, bits []uint64) ([]byte, error) {
		var buf bytes.Buffer
		sk, err := newSink(format, &buf, sc, mem)
		if err != nil {
			return nil, err
		}
		for _, b := range bits {
			rec := floatDictBatch(mem, sc, b)
			err := sk.write(rec)
			rec.Release()
			if err != nil {
				_ = sk.close()
				return nil, err
			}
		}
		err = sk.close()
		return buf.Bytes(), err
	}
	valuesOf := func(rdr interface {
		Next() bool
		RecordBatch() arrow.RecordBatch
		Err() error
	}) []uint64 {
		var got []uint64
		for rdr.Next() {
			d := rdr.RecordBatch().Column(0).(*array.Dictionary)
			for i := 0; i < d.Len(); i++ {
				got = append(got, math.Float64bits(d.Dictionary().(*array.Float64).Value(d.GetValueIndex(i))))
			}
		}
		if err := rdr.Err(); err != nil {
			t.Fatal(err)
		}
		return got
	}

	b, err := write(outArrows, sent)
	if err != nil {
		t.Fatal(err)
	}
	rdr, err := ipc.NewReader(bytes.NewReader(b), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	if got := valuesOf(rdr); !slices.Equal(got, sent) {
		t.Errorf("arrows: read back %x, want %x", got, sent)
	}
	rdr.Release()

	for _, pair := range [][]uint64{{0, 1 << 63}, {math.Float64bits(1), math.Float64bits(1.000001)}, {0x7FF8000000000001, 0x7FF8000000000002}} {
		if _, err := write(outArrow, pair); err == nil || !strings.Contains(err.Error(), "--format arrows") {
			t.Errorf("arrow file of %x: err %v, want a refusal naming --format arrows", pair, err)
		}
	}
	// The same dictionary in every batch is what the file format holds.
	same := []uint64{0x7FF8000000000001, 0x7FF8000000000001, 0x7FF8000000000001}
	b, err = write(outArrow, same)
	if err != nil {
		t.Fatal(err)
	}
	fr, err := ipc.NewFileReader(bytes.NewReader(b), ipc.WithAllocator(mem))
	if err != nil {
		t.Fatal(err)
	}
	defer fr.Close()
	var got []uint64
	for i := 0; i < fr.NumRecords(); i++ {
		rec, err := fr.RecordBatch(i)
		if err != nil {
			t.Fatal(err)
		}
		d := rec.Column(0).(*array.Dictionary)
		got = append(got, math.Float64bits(d.Dictionary().(*array.Float64).Value(d.GetValueIndex(0))))
	}
	if !slices.Equal(got, same) {
		t.Errorf("arrow file: read back %x, want %x", got, same)
	}
}
