package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/fsys"
)

// sweptFS removes the version directory a write reserved just before the
// write creates its .version.json, once, as a sweep with no age can; with
// retake, another write then reserves the directory again and makes its
// own .version.json first.
type sweptFS struct {
	fsys.FS
	root   string
	retake bool
	once   sync.Once
}

func (f *sweptFS) CreateExclusive(ctx context.Context, name string, data []byte) error {
	if path.Base(name) == versionInfoName {
		f.once.Do(func() {
			dir := filepath.Join(f.root, filepath.FromSlash(path.Dir(name)))
			if err := os.RemoveAll(dir); err != nil {
				panic(err)
			}
			if f.retake {
				if err := os.Mkdir(dir, 0o755); err != nil {
					panic(err)
				}
				// (The other write's own .version.json: the same bytes
				// but for its writer.)
				if err := os.WriteFile(filepath.Join(dir, versionInfoName), data, 0o444); err != nil {
					panic(err)
				}
			}
		})
	}
	return f.FS.CreateExclusive(ctx, name, data)
}

// TestWriteVersionSweptBeforeItsInfo: a write whose reserved version
// directory is removed before its .version.json exists (a sweep with no
// age; red team round 20's u02) makes it again and commits; one whose
// directory was meanwhile reserved again by another write is refused as
// unavailable — nothing committed, a retry safe — not as an internal
// error, and removes nothing of the other's. The retry commits.
func TestWriteVersionSweptBeforeItsInfo(t *testing.T) {
	for _, retake := range []bool{false, true} {
		t.Run(fmt.Sprintf("retake=%v", retake), func(t *testing.T) {
			dir := t.TempDir()
			l, err := fsys.NewLocal(dir)
			if err != nil {
				t.Fatal(err)
			}
			s, _ := newTestStore(t, WithFS(&sweptFS{FS: l, root: dir, retake: retake}))
			k := []string{"w"}
			rdr := ids(1, 2)
			_, err = s.Put(context.Background(), k, rdr, PutOptions{Mode: ModeWrite, RequestID: "r"})
			rdr.Release()
			switch {
			case !retake && err != nil:
				t.Fatalf("write into a swept version: %v, want it committed", err)
			case retake && !errors.Is(err, ErrUnavailable):
				t.Fatalf("write into a version taken meanwhile: %v, want ErrUnavailable", err)
			}
			if retake {
				if _, err := os.Stat(filepath.Join(dir, "w", "v0", versionInfoName)); err != nil {
					t.Fatalf("the other write's .version.json: %v", err)
				}
				put(t, s, ModeWrite, k, ids(1, 2), PutOptions{RequestID: "r"})
			}
			if _, rows := readAll(t, s, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}}); rows != `[{"id":1},{"id":2}]` {
				t.Fatalf("read after the retry: %s", rows)
			}
		})
	}
}

// TestSchemaTooLargeToStoreRefused: a put whose schema, as the store keeps
// it (base64 in a commit record or .version.json), would outgrow what a
// metadata file may be is refused before it commits, and leaves the data
// directory as it was (red team round 21's v01: an append adding columns
// with names of 1 MiB was acknowledged, and after a restart every read and
// put of the profile answered DATA_LOSS: its segment was over the 64 MiB a
// metadata file is read up to).
func TestSchemaTooLargeToStoreRefused(t *testing.T) {
	s, dir := newTestStore(t)
	k := []string{"big"}
	put(t, s, ModeWrite, k, ids(1), PutOptions{})
	long := strings.Repeat("c", 7<<20)
	wide := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64, Nullable: true}, {Name: long, Type: arrow.PrimitiveTypes.Int64, Nullable: true}}, nil)
	before := snapshotDir(t, dir)
	for _, mode := range []Mode{ModeAppend, ModeWrite} {
		rdr := fromJSON(t, wide, `[{"id":2}]`)
		_, err := s.Put(context.Background(), k, rdr, PutOptions{Mode: mode, SchemaVersion: "1.0.0"})
		rdr.Release()
		if !errors.Is(err, ErrInvalidArgument) || !strings.Contains(err.Error(), "as stored") {
			msg := fmt.Sprint(err)
			t.Fatalf("%s of a column named with 7 MiB: %.300s", mode, msg)
		}
		if after := snapshotDir(t, dir); after != before {
			t.Fatalf("%s: the refused put changed the data directory", mode)
		}
	}
	fresh, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Close()
	if _, rows := readAll(t, fresh, k, ReadOptions{SnapshotOptions: SnapshotOptions{Version: Latest}}); rows != `[{"id":1}]` {
		t.Fatalf("read after a restart: %s", rows)
	}
}
