package store

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestAutoCompact: with WithAutoCompact a version that passes the number
// of small files is compacted in the background into a new version, while
// concurrent appenders keep appending; every acknowledged append is in the
// latest version exactly once, and the compaction's record says it was
// automatic.
func TestAutoCompact(t *testing.T) {
	cases := []struct {
		name    string
		writers int
		each    int
	}{
		{"one writer", 1, 24},
		{"racing appenders", 4, 12},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s, dir := newTestStore(t, WithAutoCompact(AutoCompact{Files: 8}))
			ctx := context.Background()
			k := []string{"auto", "compact"}
			put(t, s, ModeWrite, k, ids(-1), PutOptions{})
			var wg sync.WaitGroup
			for w := range c.writers {
				wg.Go(func() {
					for i := range c.each {
						r := ids(int64(1000*w + i))
						_, err := s.Put(ctx, k, r, PutOptions{})
						r.Release()
						if err != nil {
							t.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			s.bg.Wait() // the compactions started by the last appends
			sn, err := s.Snapshot(ctx, k, SnapshotOptions{Version: -1})
			if err != nil {
				t.Fatal(err)
			}
			if sn.Version == 0 {
				t.Fatalf("nothing was compacted: the latest version is still v0 with %d files", len(sn.Files))
			}
			want := []string{`{"id":-1}`}
			for w := range c.writers {
				for i := range c.each {
					want = append(want, fmt.Sprintf(`{"id":%d}`, 1000*w+i))
				}
			}
			_, rows := readAll(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: -1}})
			if got, exp := sortedRows(t, rows), sortedRows(t, "["+joinRows(want)+"]"); got != exp {
				t.Fatalf("latest %s holds\n%s\nwant\n%s", VersionName(sn.Version), got, exp)
			}
			ps := s.state(profile{keys: k, dir: "auto/compact"})
			ps.mu.Lock()
			w := ps.log.writes[sn.Version]
			ps.mu.Unlock()
			if w == nil || w.Writer != autoCompactWriter {
				t.Fatalf("the latest version's write is not an automatic compaction: %+v", w)
			}
			auditClean(t, s, dir, k)
		})
	}
}

func joinRows(rows []string) string {
	out := ""
	for i, r := range rows {
		if i > 0 {
			out += ","
		}
		out += r
	}
	return out
}
