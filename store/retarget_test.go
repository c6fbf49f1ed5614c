package store

import (
	"context"
	"errors"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/quiverdb/quiver/store/codec"
)

// TestRetargetJudgesTypesAsSent: an append streamed into a version whose
// columns are wider than what its client sent (pyrosome writes polars'
// large_string; int64 where the client sent int32) is conformed to that
// version; re-targeted to a version written meanwhile with the client's
// own types, it is judged by what the client sent — accepted where an
// append started after the write would be, refused with the same error
// where that one would be (red team round 40's f03: it was refused
// InvalidArgument "large_utf8, not utf8", types the client never sent).
func TestRetargetJudgesTypesAsSent(t *testing.T) {
	wide := arrow.NewSchema([]arrow.Field{{Name: "w", Type: arrow.BinaryTypes.LargeString, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	sent := arrow.NewSchema([]arrow.Field{{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true}, {Name: "w", Type: arrow.BinaryTypes.String, Nullable: true}}, nil)
	narrow := arrow.NewSchema([]arrow.Field{{Name: "w", Type: arrow.BinaryTypes.String, Nullable: true}, {Name: "n", Type: arrow.PrimitiveTypes.Int8, Nullable: true}}, nil)
	for _, c := range []struct {
		name    string
		written *arrow.Schema // the write that commits while the append streams
		wantErr error
	}{
		{"the client's own types", sent, nil},
		{"as wide as the old version", wide, nil},
		{"narrower than the client's", narrow, codec.ErrSchemaMismatch},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			ctx := context.Background()
			keys := []string{"re", "typed"}
			put(t, s, ModeWrite, keys, fromJSON(t, wide, `[{"w":"old","n":0}]`), PutOptions{})
			p, err := s.resolve(keys)
			if err != nil {
				t.Fatal(err)
			}
			ps := s.state(p)
			rdr := fromJSON(t, sent, `[{"w":"appended","n":7}]`)
			defer rdr.Release()
			st, err := s.stageAppend(ctx, ps, rdr, PutOptions{Mode: ModeAppend}, 0)
			if err != nil {
				t.Fatal(err)
			}
			put(t, s, ModeWrite, keys, fromJSON(t, c.written, `[{"w":"written","n":9}]`), PutOptions{})
			res := s.commitStaged(ctx, ps, st)
			if !res.retarget {
				t.Fatalf("the append was not re-targeted: %+v", res)
			}
			_, err = s.retarget(ctx, ps, st, 0)
			// What the same append gets when it starts after the write.
			direct := fromJSON(t, sent, `[{"w":"direct","n":8}]`)
			_, derr := s.Put(ctx, keys, direct, PutOptions{Mode: ModeAppend})
			direct.Release()
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) || !errors.Is(derr, c.wantErr) {
					t.Fatalf("re-targeted: %v; started after the write: %v; want both %v", err, derr, c.wantErr)
				}
				if strings.Contains(err.Error(), "large_utf8") {
					t.Fatalf("the refusal names a type the client never sent: %v", err)
				}
				return
			}
			if err != nil || derr != nil {
				t.Fatalf("re-targeted: %v; started after the write: %v", err, derr)
			}
			sc, rows := readAll(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
			for _, want := range []string{`"written"`, `"n":9`, `"appended"`, `"n":7`, `"direct"`, `"n":8`} {
				if !strings.Contains(rows, want) {
					t.Fatalf("latest (%s) rows %s lack %s", sc, rows, want)
				}
			}
			if n := strings.Count(rows, `"w":`); n != 3 {
				t.Fatalf("latest holds %d rows, want 3: %s", n, rows)
			}
		})
	}
}

// TestRetargetNeverAltersFloatBits: an append of float32 (or float16)
// streamed into a float64 version and re-targeted to a float32 version
// written meanwhile is not committed (ErrUnavailable: retry) rather than
// cast back from float64, which would quiet its signalling NaNs (red team
// round 41's g01; float16 has no cast back at all, g02); its retry stores
// the client's bits exactly.
func TestRetargetNeverAltersFloatBits(t *testing.T) {
	bits := []uint32{0x7f800001, 0xff800002, 0x7fa00000, 0x7fc00000, 0x80000000, 0x3f800000}
	for _, c := range []struct {
		name string
		sent arrow.DataType
	}{
		{"float32", arrow.PrimitiveTypes.Float32},
		{"float16", arrow.FixedWidthTypes.Float16},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, _ := newTestStore(t)
			ctx := context.Background()
			keys := []string{"re", "floats"}
			old := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true}}, nil)
			sent := arrow.NewSchema([]arrow.Field{{Name: "x", Type: c.sent, Nullable: true}}, nil)
			written := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float32, Nullable: true}}, nil)
			put(t, s, ModeWrite, keys, fromJSON(t, old, `[{"x":1}]`), PutOptions{})
			mk := func() array.RecordReader {
				if c.sent.ID() == arrow.FLOAT16 {
					return fromJSON(t, sent, `[{"x":1.5},{"x":-2}]`)
				}
				b := array.NewFloat32Builder(memory.DefaultAllocator)
				defer b.Release()
				for _, u := range bits {
					b.Append(math.Float32frombits(u))
				}
				col := b.NewArray()
				defer col.Release()
				rec := array.NewRecordBatch(sent, []arrow.Array{col}, int64(col.Len()))
				defer rec.Release()
				rdr, err := array.NewRecordReader(sent, []arrow.RecordBatch{rec})
				if err != nil {
					t.Fatal(err)
				}
				return rdr
			}
			p, err := s.resolve(keys)
			if err != nil {
				t.Fatal(err)
			}
			ps := s.state(p)
			rdr := mk()
			defer rdr.Release()
			st, err := s.stageAppend(ctx, ps, rdr, PutOptions{Mode: ModeAppend, RequestID: "r1"}, 0)
			if err != nil {
				t.Fatal(err)
			}
			put(t, s, ModeWrite, keys, fromJSON(t, written, `[{"x":9}]`), PutOptions{})
			res := s.commitStaged(ctx, ps, st)
			if !res.retarget {
				t.Fatalf("the append was not re-targeted: %+v", res)
			}
			_, err = s.retarget(ctx, ps, st, 0)
			if !errors.Is(err, ErrUnavailable) || strings.Contains(err.Error(), "kernel") {
				t.Fatalf("re-targeted: %v, want ErrUnavailable without Arrow's wording", err)
			}
			if _, rows := readAll(t, s, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}}); strings.Count(rows, `"x"`) != 1 {
				t.Fatalf("the refused append left rows: %s", rows)
			}
			retry := mk()
			defer retry.Release()
			if _, err := s.Put(ctx, keys, retry, PutOptions{Mode: ModeAppend, RequestID: "r1"}); err != nil {
				t.Fatalf("retry: %v", err)
			}
			if c.sent.ID() != arrow.FLOAT32 {
				return
			}
			rd, err := s.Read(ctx, keys, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}})
			if err != nil {
				t.Fatal(err)
			}
			defer rd.Release()
			var got []uint32
			for rd.Next() {
				col := rd.RecordBatch().Column(0).(*array.Float32)
				for i := range col.Len() {
					got = append(got, math.Float32bits(col.Value(i)))
				}
			}
			if len(got) != len(bits)+1 || !slices.Equal(got[1:], bits) {
				t.Fatalf("float bits after the retry: %08x, want 9 then %08x", got, bits)
			}
		})
	}
}
