package store

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

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
