// Package fsystest is the conformance suite every fsys.FS must pass: one
// subtest per contract in fsys.go, the concurrency guarantees included (of
// N goroutines creating one name exclusively, or claiming one directory,
// exactly one wins).
//
// The suite assumes only what the interface promises, so that object
// stores pass it as well as local disks: an empty directory may list as
// empty or answer fsys.ErrNotExist, hidden in-progress writes may be
// listed, and nothing is said about links, permissions or paths. Tests of
// one implementation's own behaviour belong beside it.
package fsystest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/quiverdb/quiver/store/fsys"
)

// Run runs the suite. newFS must return an empty FS each time it is called
// (every subtest calls it once) and arrange its cleanup with t.Cleanup.
func Run(t *testing.T, newFS func(t *testing.T) fsys.FS) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, f fsys.FS)
	}{
		{"CreateExclusive", testCreateExclusive},
		{"CreateExclusiveRace", testCreateExclusiveRace},
		{"ConcurrentCreates", testConcurrentCreates},
		{"CreateInvisibleUntilCommit", testCreateInvisible},
		{"CommitNeverReplaces", testCommitNeverReplaces},
		{"CommitRace", testCommitRace},
		{"Abort", testAbort},
		{"CommitCancelled", testCommitCancelled},
		{"Replace", testReplace},
		{"ReadFile", testReadFile},
		{"Stat", testStat},
		{"List", testList},
		{"ListMany", testListMany},
		{"Mkdir", testMkdir},
		{"MkdirRace", testMkdirRace},
		{"Delete", testDelete},
		{"DeleteAll", testDeleteAll},
		{"Open", testOpen},
		{"OpenConcurrentReadAt", testOpenConcurrent},
		{"Names", testNames},
		{"UnsafeNames", testUnsafeNames},
		{"CancelledContext", testCancelled},
		{"RelaxedSync", testRelaxed},
		{"StageReplace", testStageReplace},
		{"Markers", testMarkers},
		{"StatPair", testStatPair},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newFS(t)) })
	}
}

// pattern is n bytes that differ with seed, so that a mix-up shows.
func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7) + seed
	}
	return b
}

func mustCreate(t *testing.T, f fsys.FS, name string, data []byte) {
	t.Helper()
	if err := f.CreateExclusive(t.Context(), name, data); err != nil {
		t.Fatalf("CreateExclusive(%q): %v", name, err)
	}
}

func mustCommit(t *testing.T, f fsys.FS, name string, data []byte) {
	t.Helper()
	w, err := f.Create(t.Context(), name)
	if err != nil {
		t.Fatalf("Create(%q): %v", name, err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatalf("Write(%q): %v", name, err)
	}
	if err := w.Commit(t.Context()); err != nil {
		t.Fatalf("Commit(%q): %v", name, err)
	}
}

// wantContent fails unless name holds data.
func wantContent(t *testing.T, f fsys.FS, name string, data []byte) {
	t.Helper()
	got, _, err := f.ReadFile(t.Context(), name)
	if err != nil {
		t.Fatalf("ReadFile(%q): %v", name, err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("ReadFile(%q) = %d bytes %.40q, want %d bytes %.40q", name, len(got), got, len(data), data)
	}
}

// wantAbsent fails unless Stat, ReadFile and Open all say name does not
// exist.
func wantAbsent(t *testing.T, f fsys.FS, name string) {
	t.Helper()
	ctx := t.Context()
	if e, err := f.Stat(ctx, name); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("Stat(%q) = %+v, %v; want ErrNotExist", name, e, err)
	}
	if _, _, err := f.ReadFile(ctx, name); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("ReadFile(%q): %v; want ErrNotExist", name, err)
	}
	r, err := f.Open(ctx, name)
	if err == nil {
		r.Close()
	}
	if !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("Open(%q): %v; want ErrNotExist", name, err)
	}
}

func wantErr(t *testing.T, what string, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Errorf("%s: err = %v, want %v", what, err, target)
	}
}

// names lists dir without hidden in-progress writes; a missing dir lists
// as empty. Temps reports whether any were listed.
func names(t *testing.T, f fsys.FS, dir string) (names []string, temps int) {
	t.Helper()
	entries, err := f.List(t.Context(), dir)
	if errors.Is(err, fsys.ErrNotExist) {
		return nil, 0
	}
	if err != nil {
		t.Fatalf("List(%q): %v", dir, err)
	}
	for _, e := range entries {
		if fsys.IsTemp(e.Name) {
			temps++
			continue
		}
		names = append(names, e.Name)
	}
	return names, temps
}

// wantEmpty fails unless dir holds nothing at all, hidden temps included
// (it may be missing).
func wantEmpty(t *testing.T, f fsys.FS, dir string) {
	t.Helper()
	got, temps := names(t, f, dir)
	if len(got) != 0 || temps != 0 {
		t.Errorf("List(%q) = %q and %d temps, want nothing", dir, got, temps)
	}
}

func testCreateExclusive(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	mustCreate(t, f, "a", []byte("one"))
	wantContent(t, f, "a", []byte("one"))
	wantErr(t, "second CreateExclusive", f.CreateExclusive(ctx, "a", []byte("two")), fsys.ErrExist)
	wantContent(t, f, "a", []byte("one"))

	// Parents are created as needed.
	mustCreate(t, f, "p/q/r", []byte("deep"))
	wantContent(t, f, "p/q/r", []byte("deep"))
	for _, dir := range []string{"p", "p/q"} {
		if e, err := f.Stat(ctx, dir); err != nil || !e.Dir {
			t.Errorf("Stat(%q) = %+v, %v; want a directory", dir, e, err)
		}
	}
	mustCreate(t, f, "p/q/s", []byte("sibling"))
	wantContent(t, f, "p/q/r", []byte("deep"))

	// Empty objects are objects.
	mustCreate(t, f, "empty", nil)
	wantContent(t, f, "empty", []byte{})
	wantErr(t, "CreateExclusive over an empty object", f.CreateExclusive(ctx, "empty", []byte("x")), fsys.ErrExist)
	wantContent(t, f, "empty", []byte{})

	// Large enough to be written in several pieces.
	big := pattern(9<<20+123, 1)
	mustCreate(t, f, "big", big)
	wantContent(t, f, "big", big)

	// A create that lost leaves no hidden temp behind.
	if _, temps := names(t, f, ""); temps != 0 {
		t.Errorf("%d hidden temps left in the root", temps)
	}
}

func testCreateExclusiveRace(t *testing.T, f fsys.FS) {
	const n = 32
	for round := range 4 {
		name := fmt.Sprintf("race/r%d/obj", round)
		var (
			wg      sync.WaitGroup
			start   = make(chan struct{})
			errs    = make([]error, n)
			content = make([][]byte, n)
		)
		for i := range n {
			content[i] = pattern(1000+i, byte(i))
			wg.Go(func() {
				<-start
				errs[i] = f.CreateExclusive(t.Context(), name, content[i])
			})
		}
		close(start)
		wg.Wait()
		winner := -1
		for i, err := range errs {
			switch {
			case err == nil && winner >= 0:
				t.Fatalf("round %d: goroutines %d and %d both created %q", round, winner, i, name)
			case err == nil:
				winner = i
			case !errors.Is(err, fsys.ErrExist):
				t.Errorf("round %d: goroutine %d: %v, want nil or ErrExist", round, i, err)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody created %q", round, name)
		}
		wantContent(t, f, name, content[winner])
		if _, temps := names(t, f, fmt.Sprintf("race/r%d", round)); temps != 0 {
			t.Errorf("round %d: %d hidden temps left", round, temps)
		}
	}
}

func testConcurrentCreates(t *testing.T, f fsys.FS) {
	// Many goroutines create distinct objects in directories none of
	// which exists yet: creating the parents concurrently must work.
	const workers, each = 16, 8
	var wg sync.WaitGroup
	start := make(chan struct{})
	for w := range workers {
		wg.Go(func() {
			<-start
			for i := range each {
				name := fmt.Sprintf("x/y/z%d/w%02d-%d", i%2, w, i)
				var err error
				if i%3 == 0 {
					err = createStreamed(t.Context(), f, name, []byte(name))
				} else {
					err = f.CreateExclusive(t.Context(), name, []byte(name))
				}
				if err != nil {
					t.Errorf("create %q: %v", name, err)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	total := 0
	for _, dir := range []string{"x/y/z0", "x/y/z1"} {
		got, _ := names(t, f, dir)
		total += len(got)
		for _, n := range got {
			wantContent(t, f, dir+"/"+n, []byte(dir+"/"+n))
		}
	}
	if total != workers*each {
		t.Errorf("listed %d objects, want %d", total, workers*each)
	}
}

func createStreamed(ctx context.Context, f fsys.FS, name string, data []byte) error {
	w, err := f.Create(ctx, name)
	if err != nil {
		return err
	}
	if _, err := w.Write(data); err != nil {
		return errors.Join(err, w.Abort())
	}
	if err := w.Commit(ctx); err != nil {
		return errors.Join(err, w.Abort())
	}
	return nil
}

func testCreateInvisible(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	mustCreate(t, f, "s/other", []byte("x"))
	w, err := f.Create(ctx, "s/obj")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	// Pieces smaller and larger than any sensible buffer.
	var want []byte
	for i, n := range []int{1, 1000, 70_000, 7, 0, 300_000, 5} {
		p := pattern(n, byte(i))
		if k, err := w.Write(p); err != nil || k != n {
			t.Fatalf("Write(%d bytes) = %d, %v", n, k, err)
		}
		want = append(want, p...)
	}
	wantAbsent(t, f, "s/obj")
	if got, _ := names(t, f, "s"); !slices.Equal(got, []string{"other"}) {
		t.Errorf("List(s) before Commit = %q, want [other] (and maybe hidden temps)", got)
	}
	if err := w.Commit(ctx); err != nil {
		t.Fatalf("Commit: %v", err)
	}
	wantContent(t, f, "s/obj", want)
	if e, err := f.Stat(ctx, "s/obj"); err != nil || e.Size != int64(len(want)) || e.Dir {
		t.Errorf("Stat after Commit = %+v, %v; want a %d-byte object", e, err, len(want))
	}
	if got, temps := names(t, f, "s"); !slices.Equal(got, []string{"obj", "other"}) || temps != 0 {
		t.Errorf("List(s) after Commit = %q and %d temps, want [obj other] and none", got, temps)
	}
	// Abort after a successful Commit does nothing.
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after Commit: %v", err)
	}
	wantContent(t, f, "s/obj", want)
	if _, err := w.Write([]byte("more")); err == nil {
		t.Error("Write after Commit succeeded")
	}
	wantContent(t, f, "s/obj", want)

	// A streamed object in the root, and an empty one.
	mustCommit(t, f, "top", []byte("top"))
	wantContent(t, f, "top", []byte("top"))
	mustCommit(t, f, "s/empty", nil)
	wantContent(t, f, "s/empty", []byte{})
}

func testCommitNeverReplaces(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	mustCreate(t, f, "c", []byte("original"))
	w, err := f.Create(ctx, "c")
	if err != nil {
		t.Fatalf("Create over an existing name: %v (the conflict is Commit's to report)", err)
	}
	if _, err := w.Write([]byte("usurper")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	wantErr(t, "Commit over an existing object", w.Commit(ctx), fsys.ErrExist)
	wantContent(t, f, "c", []byte("original"))
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after a failed Commit: %v", err)
	}
	if got, temps := names(t, f, ""); !slices.Equal(got, []string{"c"}) || temps != 0 {
		t.Errorf("List after Abort = %q and %d temps, want [c] and none", got, temps)
	}
	wantContent(t, f, "c", []byte("original"))
}

func testCommitRace(t *testing.T, f fsys.FS) {
	// Writers to one name, committed together: exactly one wins.
	const n = 8
	ctx := t.Context()
	ws := make([]fsys.Writer, n)
	for i := range ws {
		w, err := f.Create(ctx, "cr/obj")
		if err != nil {
			t.Fatalf("Create %d: %v", i, err)
		}
		if _, err := w.Write(pattern(5000+i, byte(i))); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
		ws[i] = w
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i, w := range ws {
		wg.Go(func() {
			<-start
			errs[i] = w.Commit(ctx)
		})
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both committed", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, fsys.ErrExist):
			t.Errorf("writer %d: %v, want nil or ErrExist", i, err)
		}
		if err := ws[i].Abort(); err != nil {
			t.Errorf("Abort %d: %v", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer committed")
	}
	wantContent(t, f, "cr/obj", pattern(5000+winner, byte(winner)))
	if got, temps := names(t, f, "cr"); !slices.Equal(got, []string{"obj"}) || temps != 0 {
		t.Errorf("List(cr) = %q and %d temps, want [obj] and none", got, temps)
	}
}

func testAbort(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	w, err := f.Create(ctx, "ab/x")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := w.Write(pattern(100_000, 3)); err != nil {
		t.Fatalf("Write: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	wantAbsent(t, f, "ab/x")
	wantEmpty(t, f, "ab")
	if err := w.Abort(); err != nil {
		t.Errorf("second Abort: %v", err)
	}
	if _, err := w.Write([]byte("late")); err == nil {
		t.Error("Write after Abort succeeded")
	}
	if err := w.Commit(ctx); err == nil {
		t.Error("Commit after Abort succeeded")
	}
	wantAbsent(t, f, "ab/x")
	wantEmpty(t, f, "ab")

	// Abort without a single Write.
	w, err = f.Create(ctx, "ab/y")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := w.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	wantAbsent(t, f, "ab/y")
	wantEmpty(t, f, "ab")
}

func testCommitCancelled(t *testing.T, f fsys.FS) {
	w, err := f.Create(t.Context(), "cc/x")
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := w.Write([]byte("data")); err != nil {
		t.Fatalf("Write: %v", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	wantErr(t, "Commit with a cancelled context", w.Commit(ctx), context.Canceled)
	wantAbsent(t, f, "cc/x")
	if err := w.Abort(); err != nil {
		t.Errorf("Abort after a failed Commit: %v", err)
	}
	wantAbsent(t, f, "cc/x")
	wantEmpty(t, f, "cc")
}

func testReplace(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	read := func(name string) ([]byte, fsys.Token) {
		t.Helper()
		data, tok, err := f.ReadFile(ctx, name)
		if err != nil {
			t.Fatalf("ReadFile(%q): %v", name, err)
		}
		if tok == "" {
			t.Fatalf("ReadFile(%q): empty Token", name)
		}
		return data, tok
	}

	// The empty Token: create if absent.
	if err := f.Replace(ctx, "m", []byte("v1"), ""); err != nil {
		t.Fatalf("Replace(m, v1, \"\"): %v", err)
	}
	_, t1 := read("m")
	wantErr(t, "Replace with the empty Token over an existing object", f.Replace(ctx, "m", []byte("v2"), ""), fsys.ErrPrecondition)
	wantContent(t, f, "m", []byte("v1"))

	// The right Token replaces.
	if err := f.Replace(ctx, "m", []byte("v2"), t1); err != nil {
		t.Fatalf("Replace(m, v2, t1): %v", err)
	}
	_, t2 := read("m")
	if t2 == t1 {
		t.Errorf("Token unchanged (%q) although the content changed", t1)
	}

	// A stale or made-up Token does not.
	wantErr(t, "Replace with a stale Token", f.Replace(ctx, "m", []byte("v3"), t1), fsys.ErrPrecondition)
	wantErr(t, "Replace with a made-up Token", f.Replace(ctx, "m", []byte("v3"), "bogus"), fsys.ErrPrecondition)
	wantContent(t, f, "m", []byte("v2"))
	if _, tok := read("m"); tok != t2 {
		t.Errorf("Token changed from %q to %q without a write", t2, tok)
	}

	// A chain of replacements, each with the Token just read.
	tok := t2
	seen := map[fsys.Token]bool{t1: true, t2: true}
	for i := range 5 {
		data := pattern(100+i*1000, byte(i))
		if err := f.Replace(ctx, "m", data, tok); err != nil {
			t.Fatalf("Replace %d: %v", i, err)
		}
		var got []byte
		got, tok = read("m")
		if !bytes.Equal(got, data) {
			t.Fatalf("Replace %d: content not replaced", i)
		}
		if seen[tok] {
			t.Errorf("Replace %d: Token %q seen before for other content", i, tok)
		}
		seen[tok] = true
	}

	// A missing object matches only the empty Token.
	wantErr(t, "Replace of a missing object with a Token", f.Replace(ctx, "missing", []byte("x"), t2), fsys.ErrPrecondition)
	wantErr(t, "Replace below a missing directory with a Token", f.Replace(ctx, "nodir/missing", []byte("x"), t2), fsys.ErrPrecondition)
	wantAbsent(t, f, "missing")
	wantAbsent(t, f, "nodir/missing")

	// Parents are created; the replaced object reads through Open too.
	if err := f.Replace(ctx, "n/e/s/t", []byte("nested"), ""); err != nil {
		t.Fatalf("Replace nested: %v", err)
	}
	r, err := f.Open(ctx, "n/e/s/t")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	if b, err := io.ReadAll(r); err != nil || string(b) != "nested" {
		t.Errorf("Open+ReadAll = %q, %v", b, err)
	}
	if _, temps := names(t, f, ""); temps != 0 {
		t.Errorf("%d hidden temps left", temps)
	}
}

func testReadFile(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	if _, _, err := f.ReadFile(ctx, "nope"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("ReadFile(missing): %v, want ErrNotExist", err)
	}
	mustCreate(t, f, "file", []byte("content"))
	if _, _, err := f.ReadFile(ctx, "file/below"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("ReadFile(below an object): %v, want ErrNotExist", err)
	}
	if _, _, err := f.ReadFile(ctx, "no/such/dir"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("ReadFile(in a missing directory): %v, want ErrNotExist", err)
	}
	mustCreate(t, f, "a1", []byte("same"))
	mustCreate(t, f, "a2", []byte("other"))
	_, ta1, _ := f.ReadFile(ctx, "a1")
	_, ta2, _ := f.ReadFile(ctx, "a2")
	if ta1 == "" || ta1 == ta2 {
		t.Errorf("Tokens of different content: %q and %q", ta1, ta2)
	}
}

func testStat(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	mustCreate(t, f, "st/f", []byte("12345"))
	e, err := f.Stat(ctx, "st/f")
	if err != nil {
		t.Fatalf("Stat: %v", err)
	}
	if e.Name != "st/f" || e.Size != 5 || e.Dir || e.Link || e.ModTime.IsZero() {
		t.Errorf("Stat(st/f) = %+v, want Name st/f, Size 5, a ModTime", e)
	}
	if e, err := f.Stat(ctx, "st"); err != nil || !e.Dir || e.Name != "st" {
		t.Errorf("Stat(st) = %+v, %v; want directory st", e, err)
	}
	for _, name := range []string{"st/none", "none", "st/f/below", "none/none"} {
		if _, err := f.Stat(ctx, name); !errors.Is(err, fsys.ErrNotExist) {
			t.Errorf("Stat(%q): %v, want ErrNotExist", name, err)
		}
	}
}

func testList(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	mustCreate(t, f, "l/b", []byte("bbb"))
	mustCreate(t, f, "l/a", []byte("a"))
	mustCreate(t, f, "l/c/x", []byte("x"))
	mustCommit(t, f, "l/e", []byte("eeeee"))
	if err := f.Mkdir(ctx, "l/d"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	mustCreate(t, f, "l/d/y", nil)
	mustCreate(t, f, "l/B", []byte("upper")) // sorts before "a"
	mustCreate(t, f, "l-sibling", []byte("s"))

	entries, err := f.List(ctx, "l")
	if err != nil {
		t.Fatalf("List(l): %v", err)
	}
	type row struct {
		name string
		dir  bool
		size int64
	}
	var got []row
	for _, e := range entries {
		if fsys.IsTemp(e.Name) {
			continue
		}
		if !e.Dir && e.ModTime.IsZero() {
			t.Errorf("List(l): %q has no ModTime", e.Name)
		}
		got = append(got, row{e.Name, e.Dir, e.Size})
	}
	want := []row{{"B", false, 5}, {"a", false, 1}, {"b", false, 3}, {"c", true, 0}, {"d", true, 0}, {"e", false, 5}}
	if !slices.Equal(got, want) {
		t.Errorf("List(l) = %v, want %v", got, want)
	}
	if !slices.IsSortedFunc(entries, func(a, b fsys.Entry) int { return strings.Compare(a.Name, b.Name) }) {
		t.Errorf("List(l) not sorted: %v", entries)
	}
	if got, _ := names(t, f, "l/c"); !slices.Equal(got, []string{"x"}) {
		t.Errorf("List(l/c) = %q, want [x]", got)
	}
	root, err := f.List(ctx, "")
	if err != nil {
		t.Fatalf("List(root): %v", err)
	}
	var rootNames []string
	for _, e := range root {
		rootNames = append(rootNames, e.Name)
		if e.Name == "l" && !e.Dir {
			t.Errorf("List(root): l is not a directory: %+v", e)
		}
	}
	if !slices.Equal(rootNames, []string{"l", "l-sibling"}) {
		t.Errorf("List(root) = %q, want [l l-sibling]", rootNames)
	}
	for _, dir := range []string{"nope", "l/nope", "l/a", "nope/nope"} {
		if _, err := f.List(ctx, dir); !errors.Is(err, fsys.ErrNotExist) {
			t.Errorf("List(%q): %v, want ErrNotExist", dir, err)
		}
	}
	// An empty directory lists as empty (or, on object stores, missing).
	if err := f.Mkdir(ctx, "emptydir"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	if entries, err := f.List(ctx, "emptydir"); err != nil && !errors.Is(err, fsys.ErrNotExist) || len(entries) != 0 {
		t.Errorf("List(emptydir) = %v, %v; want empty or ErrNotExist", entries, err)
	}
}

func testListMany(t *testing.T, f fsys.FS) {
	const n = 600
	var want []string
	for i := range n {
		name := fmt.Sprintf("obj-%05d-%s", (i*7919)%n, strings.Repeat("x", i%40))
		want = append(want, name)
		mustCreate(t, f, "many/"+name, []byte(name))
	}
	slices.Sort(want)
	if got, _ := names(t, f, "many"); !slices.Equal(got, want) {
		t.Errorf("List(many): %d names, want %d, sorted", len(got), len(want))
	}
}

func testMkdir(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	if err := f.Mkdir(ctx, "d1"); err != nil {
		t.Fatalf("Mkdir(d1): %v", err)
	}
	wantErr(t, "second Mkdir(d1)", f.Mkdir(ctx, "d1"), fsys.ErrExist)
	if e, err := f.Stat(ctx, "d1"); err != nil || !e.Dir {
		t.Errorf("Stat(d1) = %+v, %v; want a directory", e, err)
	}
	// Parents are created; the last element must be new.
	if err := f.Mkdir(ctx, "d2/x/y"); err != nil {
		t.Fatalf("Mkdir(d2/x/y): %v", err)
	}
	if e, err := f.Stat(ctx, "d2/x"); err != nil || !e.Dir {
		t.Errorf("Stat(d2/x) = %+v, %v; want a directory", e, err)
	}
	if err := f.Mkdir(ctx, "d2/x/z"); err != nil {
		t.Errorf("Mkdir(d2/x/z) beside d2/x/y: %v", err)
	}
	wantErr(t, "Mkdir(d2/x/y) again", f.Mkdir(ctx, "d2/x/y"), fsys.ErrExist)
	// A directory holding objects exists.
	mustCreate(t, f, "d3/obj", []byte("x"))
	wantErr(t, "Mkdir of a directory holding an object", f.Mkdir(ctx, "d3"), fsys.ErrExist)
	wantContent(t, f, "d3/obj", []byte("x"))
	// Objects go into a claimed directory.
	mustCreate(t, f, "d1/obj", []byte("in d1"))
	wantContent(t, f, "d1/obj", []byte("in d1"))
}

func testMkdirRace(t *testing.T, f fsys.FS) {
	const n = 32
	for round := range 4 {
		name := fmt.Sprintf("versions/r%d/v1", round)
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, n)
		for i := range n {
			wg.Go(func() {
				<-start
				errs[i] = f.Mkdir(t.Context(), name)
			})
		}
		close(start)
		wg.Wait()
		wins := 0
		for i, err := range errs {
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, fsys.ErrExist):
				t.Errorf("round %d: goroutine %d: %v, want nil or ErrExist", round, i, err)
			}
		}
		if wins != 1 {
			t.Errorf("round %d: %d goroutines claimed %q, want exactly 1", round, wins, name)
		}
	}
}

func testDelete(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	mustCreate(t, f, "del/a", []byte("a"))
	mustCreate(t, f, "del/b", []byte("b"))
	mustCommit(t, f, "del/c", []byte("committed")) // read-only on local disks
	for _, name := range []string{"del/a", "del/c"} {
		if err := f.Delete(ctx, name); err != nil {
			t.Fatalf("Delete(%q): %v", name, err)
		}
		wantAbsent(t, f, name)
	}
	if got, _ := names(t, f, "del"); !slices.Equal(got, []string{"b"}) {
		t.Errorf("List(del) = %q, want [b]", got)
	}
	for _, name := range []string{"del/a", "never", "no/such/dir", "del/b/below"} {
		if err := f.Delete(ctx, name); err != nil {
			t.Errorf("Delete(missing %q): %v, want nil", name, err)
		}
	}
	wantContent(t, f, "del/b", []byte("b"))
	// The name is free again.
	mustCreate(t, f, "del/a", []byte("again"))
	wantContent(t, f, "del/a", []byte("again"))
}

func testDeleteAll(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	for _, name := range []string{"t/a", "t/b/c", "t/b/d/e", "t2/x", "tt"} {
		mustCreate(t, f, name, []byte(name))
	}
	mustCommit(t, f, "t/b/ro", []byte("read-only"))
	if err := f.Mkdir(ctx, "t/emptydir"); err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	for i := range 300 {
		mustCreate(t, f, fmt.Sprintf("t/many/%03d", i), nil)
	}
	if err := f.DeleteAll(ctx, "t"); err != nil {
		t.Fatalf("DeleteAll(t): %v", err)
	}
	for _, name := range []string{"t/a", "t/b/c", "t/b/d/e", "t/b/ro", "t/many/007"} {
		wantAbsent(t, f, name)
	}
	if _, err := f.List(ctx, "t"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("List(t) after DeleteAll: %v, want ErrNotExist", err)
	}
	if _, err := f.Stat(ctx, "t"); !errors.Is(err, fsys.ErrNotExist) {
		t.Errorf("Stat(t) after DeleteAll: %v, want ErrNotExist", err)
	}
	// Siblings sharing the prefix as a string are untouched.
	wantContent(t, f, "t2/x", []byte("t2/x"))
	wantContent(t, f, "tt", []byte("tt"))
	for _, dir := range []string{"t", "never", "t2/never/deeper"} {
		if err := f.DeleteAll(ctx, dir); err != nil {
			t.Errorf("DeleteAll(missing %q): %v, want nil", dir, err)
		}
	}
	// A subtree only.
	mustCreate(t, f, "u/keep", []byte("k"))
	mustCreate(t, f, "u/sub/gone", []byte("g"))
	if err := f.DeleteAll(ctx, "u/sub"); err != nil {
		t.Fatalf("DeleteAll(u/sub): %v", err)
	}
	wantAbsent(t, f, "u/sub/gone")
	if got, _ := names(t, f, "u"); !slices.Equal(got, []string{"keep"}) {
		t.Errorf("List(u) = %q, want [keep]", got)
	}
	// The names are free again.
	mustCreate(t, f, "t/a", []byte("new"))
	wantContent(t, f, "t/a", []byte("new"))
}

func testOpen(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	data := pattern(100_000, 9)
	mustCreate(t, f, "o/obj", data)
	r, err := f.Open(ctx, "o/obj")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	if r.Size() != int64(len(data)) {
		t.Errorf("Size = %d, want %d", r.Size(), len(data))
	}
	readAt := func(off int64, n int) ([]byte, error) {
		b := make([]byte, n)
		k, err := r.ReadAt(b, off)
		return b[:k], err
	}
	for _, c := range []struct {
		off     int64
		n       int
		wantN   int
		wantEOF bool
	}{
		{0, 10, 10, false},
		{12345, 5000, 5000, false},
		{99_990, 10, 10, false},
		{99_990, 20, 10, true},
		{100_000, 1, 0, true},
		{200_000, 1, 0, true},
	} {
		got, err := readAt(c.off, c.n)
		if len(got) != c.wantN || c.wantN > 0 && !bytes.Equal(got, data[c.off:c.off+int64(c.wantN)]) {
			t.Errorf("ReadAt(%d, %d) = %d bytes, want %d (or wrong bytes)", c.off, c.n, len(got), c.wantN)
		}
		if c.wantEOF && err != io.EOF || !c.wantEOF && err != nil {
			t.Errorf("ReadAt(%d, %d): err = %v, want EOF %v", c.off, c.n, err, c.wantEOF)
		}
	}
	// Sequential reads and seeks.
	if pos, err := r.Seek(500, io.SeekStart); err != nil || pos != 500 {
		t.Fatalf("Seek(500) = %d, %v", pos, err)
	}
	b := make([]byte, 10)
	if _, err := io.ReadFull(r, b); err != nil || !bytes.Equal(b, data[500:510]) {
		t.Errorf("Read after Seek = %v, %v", b, err)
	}
	if pos, err := r.Seek(0, io.SeekCurrent); err != nil || pos != 510 {
		t.Errorf("Seek(0, current) = %d, %v; want 510", pos, err)
	}
	if pos, err := r.Seek(-10, io.SeekEnd); err != nil || pos != 99_990 {
		t.Fatalf("Seek(-10, end) = %d, %v", pos, err)
	}
	rest, err := io.ReadAll(r)
	if err != nil || !bytes.Equal(rest, data[99_990:]) {
		t.Errorf("ReadAll after Seek(-10, end) = %d bytes, %v", len(rest), err)
	}
	if n, err := r.Read(b); n != 0 || err != io.EOF {
		t.Errorf("Read at the end = %d, %v; want 0, EOF", n, err)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if all, err := io.ReadAll(r); err != nil || !bytes.Equal(all, data) {
		t.Errorf("ReadAll from the start = %d bytes, %v", len(all), err)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	// An empty object.
	mustCreate(t, f, "o/empty", nil)
	e, err := f.Open(ctx, "o/empty")
	if err != nil {
		t.Fatalf("Open(empty): %v", err)
	}
	if n, err := e.Read(b); e.Size() != 0 || n != 0 || err != io.EOF {
		t.Errorf("empty object: Size %d, Read = %d, %v", e.Size(), n, err)
	}
	if err := e.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}

	// The File keeps what it opened when the name is replaced.
	if err := f.Replace(ctx, "o/m", []byte("first"), ""); err != nil {
		t.Fatal(err)
	}
	_, tok, _ := f.ReadFile(ctx, "o/m")
	old, err := f.Open(ctx, "o/m")
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := f.Replace(ctx, "o/m", []byte("second, longer"), tok); err != nil {
		t.Fatal(err)
	}
	if all, err := io.ReadAll(old); err != nil || string(all) != "first" || old.Size() != 5 {
		t.Errorf("File opened before Replace reads %q, %v (Size %d); want first", all, err, old.Size())
	}

	for _, name := range []string{"o/none", "none/none", "o/obj/below"} {
		if r, err := f.Open(ctx, name); !errors.Is(err, fsys.ErrNotExist) {
			if err == nil {
				r.Close()
			}
			t.Errorf("Open(%q): %v, want ErrNotExist", name, err)
		}
	}
	if r, err := f.Open(ctx, "o"); err == nil {
		r.Close()
		t.Error("Open of a directory succeeded")
	}
}

func testOpenConcurrent(t *testing.T, f fsys.FS) {
	data := pattern(1<<20, 4)
	mustCreate(t, f, "obj", data)
	r, err := f.Open(t.Context(), "obj")
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer r.Close()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			b := make([]byte, 4096)
			for i := range 64 {
				off := int64((g*64+i)*4096) % int64(len(data)-len(b))
				if _, err := r.ReadAt(b, off); err != nil {
					t.Errorf("ReadAt(%d): %v", off, err)
					return
				}
				if !bytes.Equal(b, data[off:off+int64(len(b))]) {
					t.Errorf("ReadAt(%d): wrong bytes", off)
					return
				}
			}
		})
	}
	wg.Wait()
}

func testNames(t *testing.T, f fsys.FS) {
	// Names with spaces, non-ASCII letters, dots and leading dashes are
	// ordinary names.
	for _, name := range []string{"sp ace/ü.parquet", "a.b/c..d", "-dash", "x/.hidden", "x/...", "x/a.tmp", "key=value/part-0.parquet", strings.Repeat("n", 200)} {
		mustCreate(t, f, name, []byte(name))
		wantContent(t, f, name, []byte(name))
		mustCommit(t, f, name+"2", []byte(name))
		wantContent(t, f, name+"2", []byte(name))
	}
}

// UnsafeNames are names every FS refuses with ErrUnsafePath.
var UnsafeNames = []string{
	"", "/", "/abs", "/abs/b", "a/../b", "..", "../a", "a/..", ".", "./a", "a/.", "a/./b",
	"a//b", "a/", "//a", "a\\b", "\\a", "..\\a", "a\x00b", "\x00",
}

func testUnsafeNames(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	ops := []struct {
		op string
		fn func(name string) error
	}{
		{"CreateExclusive", func(name string) error { return f.CreateExclusive(ctx, name, []byte("x")) }},
		{"Create", func(name string) error {
			w, err := f.Create(ctx, name)
			if err == nil {
				w.Abort()
			}
			return err
		}},
		{"ReadFile", func(name string) error { _, _, err := f.ReadFile(ctx, name); return err }},
		{"Replace", func(name string) error { return f.Replace(ctx, name, []byte("x"), "") }},
		{"ReplaceToken", func(name string) error { return f.Replace(ctx, name, []byte("x"), "tok") }},
		{"Open", func(name string) error {
			r, err := f.Open(ctx, name)
			if err == nil {
				r.Close()
			}
			return err
		}},
		{"Stat", func(name string) error { _, err := f.Stat(ctx, name); return err }},
		{"List", func(name string) error {
			if name == "" {
				return fsys.ErrUnsafePath // the root, a valid dir for List
			}
			_, err := f.List(ctx, name)
			return err
		}},
		{"Mkdir", func(name string) error { return f.Mkdir(ctx, name) }},
		{"Delete", func(name string) error { return f.Delete(ctx, name) }},
		{"DeleteAll", func(name string) error { return f.DeleteAll(ctx, name) }},
	}
	mustCreate(t, f, "a/b", []byte("keep")) // something to be deleted by mistake
	for _, name := range UnsafeNames {
		if fsys.ValidName(name) {
			t.Errorf("ValidName(%q) = true", name)
		}
		for _, o := range ops {
			if err := o.fn(name); !errors.Is(err, fsys.ErrUnsafePath) {
				t.Errorf("%s(%q): %v, want ErrUnsafePath", o.op, name, err)
			}
		}
	}
	wantContent(t, f, "a/b", []byte("keep"))
	if got, temps := names(t, f, ""); !slices.Equal(got, []string{"a"}) || temps != 0 {
		t.Errorf("List(root) = %q and %d temps after refused calls, want [a]", got, temps)
	}
	if got, temps := names(t, f, "a"); !slices.Equal(got, []string{"b"}) || temps != 0 {
		t.Errorf("List(a) = %q and %d temps after refused calls, want [b]", got, temps)
	}
}

func testCancelled(t *testing.T, f fsys.FS) {
	mustCreate(t, f, "keep/obj", []byte("keep"))
	if err := f.Replace(t.Context(), "keep/m", []byte("m"), ""); err != nil {
		t.Fatal(err)
	}
	_, tok, _ := f.ReadFile(t.Context(), "keep/m")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ops := []struct {
		op string
		fn func() error
	}{
		{"CreateExclusive", func() error { return f.CreateExclusive(ctx, "new/obj", []byte("x")) }},
		{"Create", func() error {
			w, err := f.Create(ctx, "new/obj")
			if err == nil {
				w.Abort()
			}
			return err
		}},
		{"ReadFile", func() error { _, _, err := f.ReadFile(ctx, "keep/obj"); return err }},
		{"Replace", func() error { return f.Replace(ctx, "keep/m", []byte("changed"), tok) }},
		{"ReplaceNew", func() error { return f.Replace(ctx, "new/m", []byte("x"), "") }},
		{"Open", func() error {
			r, err := f.Open(ctx, "keep/obj")
			if err == nil {
				r.Close()
			}
			return err
		}},
		{"Stat", func() error { _, err := f.Stat(ctx, "keep/obj"); return err }},
		{"List", func() error { _, err := f.List(ctx, "keep"); return err }},
		{"Mkdir", func() error { return f.Mkdir(ctx, "new") }},
		{"Delete", func() error { return f.Delete(ctx, "keep/obj") }},
		{"DeleteAll", func() error { return f.DeleteAll(ctx, "keep") }},
	}
	for _, o := range ops {
		if err := o.fn(); !errors.Is(err, context.Canceled) {
			t.Errorf("%s with a cancelled context: %v, want context.Canceled", o.op, err)
		}
	}
	wantContent(t, f, "keep/obj", []byte("keep"))
	wantContent(t, f, "keep/m", []byte("m"))
	wantEmpty(t, f, "new")
	if got, temps := names(t, f, ""); !slices.Equal(got, []string{"keep"}) || temps != 0 {
		t.Errorf("List(root) = %q and %d temps, want [keep]", got, temps)
	}
}

// testRelaxed: every durability of fsys.Relaxed (through the package
// functions, which fall back to the FS methods elsewhere) keeps the
// visibility and atomicity of the FS method it relaxes.
func testRelaxed(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	for _, sync := range []fsys.Sync{fsys.SyncFull, fsys.SyncContent, fsys.SyncNone} {
		d := fmt.Sprintf("relaxed%d", sync)
		name := d + "/a"
		data := pattern(100, byte(sync))
		if err := fsys.CreateExclusiveSync(ctx, f, name, data, sync); err != nil {
			t.Fatalf("sync %d: CreateExclusiveSync: %v", sync, err)
		}
		if err := fsys.CreateExclusiveSync(ctx, f, name, nil, sync); !errors.Is(err, fsys.ErrExist) {
			t.Fatalf("sync %d: second CreateExclusiveSync: %v, want ErrExist", sync, err)
		}
		if err := fsys.CreateExclusiveSync(ctx, f, d+"/empty", nil, sync); err != nil {
			t.Fatalf("sync %d: empty CreateExclusiveSync: %v", sync, err)
		}
		wantContent(t, f, name, data)
		wantContent(t, f, d+"/empty", nil)
		_, tok, err := f.ReadFile(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		next := pattern(50, byte(sync)+1)
		if err := fsys.ReplaceSync(ctx, f, name, next, "x"+tok, sync); !errors.Is(err, fsys.ErrPrecondition) {
			t.Fatalf("sync %d: ReplaceSync with a stale token: %v, want ErrPrecondition", sync, err)
		}
		if err := fsys.ReplaceSync(ctx, f, name, next, tok, sync); err != nil {
			t.Fatalf("sync %d: ReplaceSync: %v", sync, err)
		}
		wantContent(t, f, name, next)
		if err := fsys.ReplaceSync(ctx, f, d+"/new", data, "", sync); err != nil {
			t.Fatalf("sync %d: ReplaceSync of a new object: %v", sync, err)
		}
		wantContent(t, f, d+"/new", data)
		w, err := fsys.CreateSync(ctx, f, d+"/w", sync)
		if err != nil {
			t.Fatalf("sync %d: CreateSync: %v", sync, err)
		}
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		wantAbsent(t, f, d+"/w")
		if err := w.Commit(ctx); err != nil {
			t.Fatalf("sync %d: Commit: %v", sync, err)
		}
		wantContent(t, f, d+"/w", data)
		w2, err := fsys.CreateSync(ctx, f, d+"/w", sync)
		if err != nil {
			t.Fatal(err)
		}
		if err := w2.Commit(ctx); !errors.Is(err, fsys.ErrExist) {
			t.Fatalf("sync %d: Commit over an object: %v, want ErrExist", sync, err)
		}
		_ = w2.Abort()
		wantContent(t, f, d+"/w", data)
		if err := fsys.SyncDir(ctx, f, d); err != nil {
			t.Fatalf("sync %d: SyncDir: %v", sync, err)
		}
		if err := fsys.SyncDir(ctx, f, ""); err != nil {
			t.Fatalf("sync %d: SyncDir of the root: %v", sync, err)
		}
		if err := fsys.DeleteSync(ctx, f, name, sync); err != nil {
			t.Fatalf("sync %d: DeleteSync: %v", sync, err)
		}
		wantAbsent(t, f, name)
		if err := fsys.DeleteSync(ctx, f, name, sync); err != nil {
			t.Fatalf("sync %d: DeleteSync of a missing object: %v", sync, err)
		}
	}
}

// testMarkers: CreateMarker makes empty objects exclusively (racing
// creators: one wins), in new directories too, that Delete removes one by
// one, and never over an existing object.
func testMarkers(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	for _, name := range []string{"m1", "d/e/m2", "d/e/m3"} {
		if err := fsys.CreateMarker(ctx, f, name); err != nil {
			t.Fatalf("CreateMarker(%q): %v", name, err)
		}
		wantContent(t, f, name, []byte{})
	}
	wantErr(t, "CreateMarker over a marker", fsys.CreateMarker(ctx, f, "m1"), fsys.ErrExist)
	mustCreate(t, f, "obj", []byte("data"))
	wantErr(t, "CreateMarker over an object", fsys.CreateMarker(ctx, f, "obj"), fsys.ErrExist)
	wantContent(t, f, "obj", []byte("data"))
	if err := f.Delete(ctx, "d/e/m2"); err != nil {
		t.Fatal(err)
	}
	wantContent(t, f, "d/e/m3", []byte{})
	if err := fsys.CreateMarker(ctx, f, "d/e/m2"); err != nil {
		t.Fatalf("CreateMarker after Delete: %v", err)
	}
	var wins atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			switch err := fsys.CreateMarker(ctx, f, "race"); {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, fsys.ErrExist):
				t.Errorf("racing CreateMarker: %v", err)
			}
		}()
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d racing CreateMarker calls won, want 1", wins.Load())
	}
	if got, _ := names(t, f, "d/e"); len(got) != 2 {
		t.Errorf("d/e holds %v, want m2 and m3", got)
	}
}

// testStatPair: StatPair is Stat of a directory and of a name in it.
func testStatPair(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	mustCreate(t, f, "a/b", []byte("four"))
	d, e, errName, err := fsys.StatPair(ctx, f, "a", "b")
	if err != nil || errName != nil || !d.Dir || e.Dir || e.Size != 4 {
		t.Fatalf("StatPair(a, b) = %+v, %+v, %v, %v", d, e, errName, err)
	}
	if _, _, errName, err := fsys.StatPair(ctx, f, "a", "missing"); err != nil || !errors.Is(errName, fs.ErrNotExist) {
		t.Errorf("StatPair(a, missing): %v, %v", errName, err)
	}
	if _, _, _, err := fsys.StatPair(ctx, f, "nodir", "x"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("StatPair(nodir, x): %v", err)
	}
}

// testStageReplace: a replacement staged (fsys.StageReplace: written ahead
// on storage that can, kept for later elsewhere) changes nothing until its
// Replace, which checks the token as Replace does and may be retried after
// a precondition failure; Abort leaves no temp behind.
func testStageReplace(t *testing.T, f fsys.FS) {
	ctx := t.Context()
	name := "stage/head"
	old := pattern(40, 1)
	mustCreate(t, f, name, old)
	_, tok, err := f.ReadFile(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	next := pattern(60, 2)
	h, err := fsys.StageReplace(ctx, f, name, next)
	if err != nil {
		t.Fatalf("StageReplace: %v", err)
	}
	wantContent(t, f, name, old)
	if err := h.Replace(ctx, "x"+tok); !errors.Is(err, fsys.ErrPrecondition) {
		t.Fatalf("Replace with a stale token: %v, want ErrPrecondition", err)
	}
	wantContent(t, f, name, old)
	if err := h.Replace(ctx, tok); err != nil {
		t.Fatalf("Replace after a precondition failure: %v", err)
	}
	wantContent(t, f, name, next)
	if err := h.Abort(); err != nil {
		t.Fatalf("Abort after Replace: %v", err)
	}
	wantContent(t, f, name, next)
	if _, temps := names(t, f, "stage"); temps != 0 {
		t.Fatalf("%d temps left after a replace", temps)
	}

	// Staged, then abandoned: nothing changes and nothing is left.
	h, err = fsys.StageReplace(ctx, f, name, pattern(70, 3))
	if err != nil {
		t.Fatalf("StageReplace: %v", err)
	}
	if err := h.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	wantContent(t, f, name, next)
	if got, temps := names(t, f, "stage"); temps != 0 || len(got) != 1 {
		t.Fatalf("after Abort: names %v, %d temps", got, temps)
	}

	// The empty token: only where nothing exists yet.
	h, err = fsys.StageReplace(ctx, f, "stage/new", pattern(10, 4))
	if err != nil {
		t.Fatalf("StageReplace: %v", err)
	}
	wantAbsent(t, f, "stage/new")
	if err := h.Replace(ctx, ""); err != nil {
		t.Fatalf("Replace with the empty token of a new name: %v", err)
	}
	wantContent(t, f, "stage/new", pattern(10, 4))
	h, err = fsys.StageReplace(ctx, f, "stage/new", pattern(11, 5))
	if err != nil {
		t.Fatalf("StageReplace: %v", err)
	}
	if err := h.Replace(ctx, ""); !errors.Is(err, fsys.ErrPrecondition) {
		t.Fatalf("Replace with the empty token of an existing name: %v, want ErrPrecondition", err)
	}
	if err := h.Abort(); err != nil {
		t.Fatalf("Abort: %v", err)
	}
	wantContent(t, f, "stage/new", pattern(10, 4))
	if _, temps := names(t, f, "stage"); temps != 0 {
		t.Fatalf("%d temps left", temps)
	}
}
