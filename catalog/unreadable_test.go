package catalog

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/flight"

	"github.com/quiverdb/quiver/store"
	"github.com/quiverdb/quiver/store/fsys"
	"github.com/quiverdb/quiver/store/fsys/faultfs"
)

// TestListingsFailOnUnreadableProfiles: a profile the storage does not let
// the server read (no answer, a refusal) fails a listing and a read of a
// prefix, where it was left out and the answer given as whole (red team
// round 49's p08: DoGet of a prefix answered 3 rows of 4, ListFlights
// without the profile). A profile that is damaged is still left out of a
// listing (verify reports it), and the others listed.
func TestListingsFailOnUnreadableProfiles(t *testing.T) {
	dir := t.TempDir()
	local, err := fsys.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	ffs := faultfs.New(local)
	st, err := store.Open("test", store.WithFS(ffs))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range [][]string{{"p", "q"}, {"p", "r"}, {"s", "t"}} {
		appendRows(t, st, k, 2)
	}
	c := New(st)
	ctx := context.Background()
	list := func(prefix []string) ([]string, error) {
		var out []string
		err := c.List(ctx, prefix, func(fi *flight.FlightInfo) error {
			out = append(out, fmt.Sprint(fi.FlightDescriptor.Path))
			return nil
		})
		return out, err
	}
	resolve := func(prefix string) error {
		r, err := ParseTicket([]byte(`{"prefix": "` + prefix + `"}`))
		if err == nil {
			_, err = c.Resolve(ctx, r)
		}
		return err
	}
	unavailable := fmt.Errorf("reset: %w", fsys.ErrUnavailable)
	for _, rule := range []faultfs.Rule{
		{Op: faultfs.ReadFile, Glob: "p/r/manifest.json", Err: unavailable},
		{Op: faultfs.List, Glob: "p/r/*", Err: unavailable},
		{Op: faultfs.ReadFile, Glob: "p/r/*", Err: unavailable},
		{Op: faultfs.ReadFile, Glob: "p/manifest.json", Err: unavailable}, // (the prefix itself: round 49's p02)
	} {
		ffs.Clear()
		ffs.Add(rule)
		for _, prefix := range [][]string{nil, {"p"}} {
			if got, err := list(prefix); !errors.Is(err, fsys.ErrUnavailable) {
				t.Errorf("%s %q: listing %v, %v; want the storage's error", rule.Op, rule.Glob, got, err)
			}
		}
		if rule.Op == faultfs.List {
			continue // (a read of p/r lists nothing of it: nothing to fail)
		}
		if err := resolve("p"); !errors.Is(err, fsys.ErrUnavailable) {
			t.Errorf("%s %q: read of the prefix p: %v; want the storage's error", rule.Op, rule.Glob, err)
		}
	}
	ffs.Clear()
	// A manifest missing under a commit log that holds the profile (a
	// first commit whose manifest create failed): read from the log, so
	// listed and read with the others (red team round 50's p06).
	if err := os.Remove(filepath.Join(dir, "p", "q", "manifest.json")); err != nil {
		t.Fatal(err)
	}
	st.Forget([]string{"p", "q"})
	if got, err := list([]string{"p"}); err != nil || len(got) != 2 {
		t.Errorf("listing with p/q's manifest missing: %v, %v; want p/q and p/r", got, err)
	}
	r, err := ParseTicket([]byte(`{"prefix": "p"}`))
	if err != nil {
		t.Fatal(err)
	}
	if ks, err := c.Resolve(ctx, r); err != nil || len(ks) != 2 {
		t.Errorf("read of the prefix p with p/q's manifest missing: %v, %v", ks, err)
	}
	// Damage, not unavailability: listed without it.
	if err := os.WriteFile(filepath.Join(dir, "p", "r", "manifest.json"), []byte("not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	st.Forget([]string{"p", "r"})
	if got, err := list(nil); err != nil || len(got) != 2 {
		t.Errorf("listing with p/r damaged: %v, %v; want p/q and s/t", got, err)
	}
}
