package store

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/quiverdb/quiver/store/fsys"
)

// profileState is what this process remembers of one profile: its commit
// log, the immutable facts of its versions, and its commit queue.
type profileState struct {
	p profile

	// csvAppend is held by the append to a CSV version in progress
	// (one at a time: see Store.put).
	csvAppend chan struct{}

	mu  sync.Mutex // guards log and the caches below
	log *logView
	// unnested: no profile was found above or below this one (checked
	// once, at its first put by this process: checkUnnested).
	unnested bool
	// syncTicket numbers syncLog's callers as they arrive; fresh is the
	// highest ticket handed out before the last successful refresh of
	// syncLog began: every caller up to it arrived before that refresh
	// read the log, so the view already shows what it must.
	syncTicket atomic.Uint64
	fresh      uint64
	// infos caches .version.json of versions that have one (immutable).
	infos map[int]*versionHead
	// ours caches, per root data file path and size, whether Quiver wrote
	// it (its footer carries quiver.schema_version).
	ours map[string]fileFacts
	// nextIndex is where the next claim in a version starts probing.
	nextIndex map[int]int
	// headTok is the token of .log/HEAD as this process last wrote it.
	headTok fsys.Token
	// lists caches the root listing of versions by directory mtime.
	lists map[int]dirList
	// loaded keeps readers' loads of versions Quiver wrote (loader.go).
	loaded map[int]loadedVersion
	// schemas keeps the schemas of versions without .version.json, by
	// their first file's path (loader.go).
	schemas map[string]schemaFact
	// pyro is what a read of a profile no Quiver ever wrote (no commit
	// log, no .quiver.kind) learned, stamped with its directory's
	// modification time (readableVersion).
	pyro pyroFacts

	commit committer
}

// pyroFacts: the latest version a pyrosome profile's manifest named,
// while its directory's modification time is stamp. A manifest is
// replaced by renaming a new one in, and a commit log or .quiver.kind
// appears as a new entry: each changes the directory's modification time.
type pyroFacts struct {
	stamp  pyroStamp // zero: nothing known
	latest int
}

// pyroStamp identifies the state of a pyrosome profile's directory and
// manifest: their status change times (stampOf), and the manifest's size
// and modification time, so that a manifest rewritten in place (not
// renamed in) is seen too.
type pyroStamp struct {
	dir, manifest time.Time
	size          int64
	mod           time.Time
}

func (a pyroStamp) IsZero() bool { return a.dir.IsZero() }

func (a pyroStamp) equal(b pyroStamp) bool {
	return a.dir.Equal(b.dir) && a.manifest.Equal(b.manifest) && a.size == b.size && a.mod.Equal(b.mod)
}

// dirList is a cached listing of a version directory's root.
type dirList struct {
	mtime   time.Time
	entries []fsys.Entry
}

// fileFacts are facts read once from an immutable file's footer.
type fileFacts struct {
	size int64
	rows int64
	ours bool
	// gone: the file was listed but is no more (not kept): an
	// uncommitted file its failed put removed, as nothing else removes one
	// file of a version.
	gone bool
}

// versionHead is what a version is, without its files: from .version.json,
// or (pyrosome versions) from its first file.
type versionHead struct {
	info   *VersionInfo
	schema *arrow.Schema
}

func newProfileState(p profile) *profileState {
	ps := &profileState{p: p, log: newLogView(), infos: map[int]*versionHead{}, ours: map[string]fileFacts{},
		nextIndex: map[int]int{}, lists: map[int]dirList{}, loaded: map[int]loadedVersion{},
		schemas: map[string]schemaFact{}, csvAppend: make(chan struct{}, 1)}
	ps.commit.ps = ps
	return ps
}

// Known reports whether the store holds in-memory state of the profile
// keys names (caches of its log, versions and listings), made by an
// earlier operation on it.
func (s *Store) Known(keys []string) bool {
	p, err := s.resolve(keys)
	if err != nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.profiles[p.dir] != nil
}

// CheckLog brings this process's view of keys' commit log up to date and
// checks that what it knows is still on storage (its first segment, and
// its last segment as it read or wrote it): ErrDataLoss if the log is
// broken or lost or changed records under this process. Sweep calls it
// before it removes anything of a profile: a file whose record was
// deleted under a server that knew it is committed data, not an orphan
// (red team round 29's m01).
func (s *Store) CheckLog(ctx context.Context, keys []string) error {
	p, err := s.resolve(keys)
	if err != nil {
		return err
	}
	ps := s.state(p)
	if err := s.syncLog(ctx, ps); err != nil {
		return err
	}
	return s.checkLogEnds(ctx, ps)
}

// SettleManifest writes the manifest of a profile whose commit log holds
// a write the manifest does not name — a writer died between its record
// and its manifest move, a first put's before its manifest existed (red
// team round 32's p01), or the manifest was deleted — as the profile's
// next commit would, holding its lock, and reports whether it moved it.
// A log that is broken or changed under this process is refused
// (ErrDataLoss). Sweep calls it, so that a kill -9 leaves nothing for
// verify to report once swept.
func (s *Store) SettleManifest(ctx context.Context, keys []string) (bool, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return false, err
	}
	ps := s.state(p)
	if err := s.syncLog(ctx, ps); err != nil {
		return false, err
	}
	before, _, err := s.readManifest(ctx, p)
	switch {
	case errors.Is(err, ErrNotFound):
		before = -1
	case err != nil:
		return false, err
	}
	if err := s.settleManifest(ctx, ps); err != nil {
		return false, err
	}
	after, _, err := s.readManifest(ctx, p)
	if errors.Is(err, ErrNotFound) {
		return false, nil
	}
	return err == nil && after != before, err
}

// Writing reports whether puts of this process to the profile keys names
// are in flight: their files, not yet committed, look like a killed
// writer's orphans to sweep and verify, which leave young ones alone
// while it is so.
func (s *Store) Writing(keys []string) bool {
	p, err := s.resolve(keys)
	if err != nil {
		return false
	}
	return s.writingTo(p)
}

func (s *Store) writingTo(p profile) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writing[p.dir] > 0
}

// PutsBegun counts the puts this process has begun, to any profile: a
// caller that reads it before and after looking at storage knows whether
// a put may have run meanwhile (one that began and ended in between).
func (s *Store) PutsBegun() uint64 { return s.putsBegun.Load() }

// Forget drops the in-memory state of the profile keys names unless a
// commit of it is under way. That state is a cache of what is on disk:
// the next operation on the profile reads it again (an operation still
// holding the old state behaves as another process would, which the
// protocol allows for). A walk over every profile (the start-up sweep)
// forgets what it alone loaded: ten thousand profiles' states kept a
// pointer-dense heap that every garbage collection of a large read or put
// then scanned (a 1 GiB put took 50% longer).
func (s *Store) Forget(keys []string) {
	p, err := s.resolve(keys)
	if err != nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.profiles[p.dir]
	if ps == nil {
		return
	}
	c := &ps.commit
	c.mu.Lock()
	busy := c.leading || len(c.queue) > 0 || c.compacting.Load()
	c.mu.Unlock()
	if !busy {
		delete(s.profiles, p.dir)
	}
}

// state returns the process-wide state of profile p.
func (s *Store) state(p profile) *profileState {
	key := p.dir
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.profiles[key]
	if ps == nil {
		ps = newProfileState(p)
		s.profiles[key] = ps
	}
	return ps
}

// syncLog brings the profile's log view up to date and returns it. The
// view must only be read while ps.mu is held; callers copy what they need.
//
// Callers that queued for the lock while another refreshed share the
// refresh that began after they arrived (32 concurrent appenders each read
// .log/HEAD and probed the next segment under the lock, one after the
// other: 5% of the server's CPU).
func (s *Store) syncLog(ctx context.Context, ps *profileState) error {
	t := ps.syncTicket.Add(1)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if t <= ps.fresh {
		return nil
	}
	start := ps.syncTicket.Load()
	if err := s.refreshLog(ctx, ps.p, ps.log); err != nil {
		return err
	}
	ps.fresh = start
	return nil
}

// exists reports whether the profile has a manifest.
func (s *Store) exists(ctx context.Context, p profile) (bool, error) {
	_, err := s.fs.Stat(ctx, p.join(manifestName))
	if err == nil {
		return true, nil
	}
	if isNotExist(err) {
		return false, nil
	}
	return false, fmt.Errorf("%s: %w", p, err)
}

// checkCreatable refuses, without changing anything, to create p inside
// another profile or above one. It is the early check; markProfile is the
// race-free one at commit.
func (s *Store) checkCreatable(ctx context.Context, p profile) error {
	for i := 1; i < len(p.keys); i++ {
		anc := profile{keys: p.keys[:i], dir: path.Join(p.keys[:i]...)}
		if err := s.checkKind(ctx, anc, kindParent, p); err != nil {
			return err
		}
		ok, err := s.exists(ctx, anc)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%w: cannot create %s inside profile %s", ErrNestedProfile, p, anc)
		}
	}
	if err := s.checkKind(ctx, p, kindProfile, p); err != nil {
		return err
	}
	below, err := s.profileBelow(ctx, p.dir, 0)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if below != "" {
		return fmt.Errorf("%w: cannot create %s above other profiles (%s is one)", ErrNestedProfile, p, below)
	}
	return nil
}

// checkUnnested refuses a put to an existing profile that has another
// profile above or below it, which pyrosome allows and Quiver never makes
// (format.md "No profile above or below another"): its records would sit
// where listings, verify and sweep do not descend (red team round 35's
// r21). Checked once per profile and process: only pyrosome can nest
// them, and reads of such profiles still work.
func (s *Store) checkUnnested(ctx context.Context, ps *profileState) error {
	ps.mu.Lock()
	done := ps.unnested
	ps.mu.Unlock()
	if done {
		return nil
	}
	p := ps.p
	for i := 1; i < len(p.keys); i++ {
		anc := profile{keys: p.keys[:i], dir: path.Join(p.keys[:i]...)}
		ok, err := s.exists(ctx, anc)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("%w: %s lies inside profile %s (made so by another writer); Quiver reads it but writes no profile inside another", ErrNestedProfile, p, anc)
		}
	}
	below, err := s.findBelow(ctx, p.dir, 0, false)
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	if below != "" {
		return fmt.Errorf("%w: %s lies above profile %s (made so by another writer); Quiver reads it but writes no profile above another", ErrNestedProfile, p, below)
	}
	ps.mu.Lock()
	ps.unnested = true
	ps.mu.Unlock()
	return nil
}

// checkNoCommitted refuses to create a profile in a directory holding a
// version with the files of two puts (PutsIn): it was committed, and its
// manifest and log removed; a new log would make it look abandoned, for
// sweep to remove (red team round 31's o01). Versions of first puts that
// were killed hold one put's files each, and are built on as before. A
// put runs it before it writes anything (not at its commit, where its
// own files, perhaps thousands, would be read for nothing).
func (s *Store) checkNoCommitted(ctx context.Context, p profile) error {
	if s.loggedProfile(ctx, p) {
		return nil // its log holds its versions: the put goes on from it
	}
	entries, err := s.fs.List(ctx, p.dir)
	if err != nil {
		return nil //nolint:nilerr // no directory yet, or left to the put
	}
	var ps *profileState
	for _, v := range versionDirs(entries) {
		if ps == nil {
			ps = newProfileState(p)
		}
		vs, err := s.loadVersion(ctx, ps, v, -1, loadFull)
		if err != nil {
			continue
		}
		if n := s.PutsIn(ctx, vs); n > 1 {
			return fmt.Errorf("%w: %s: %s holds the files of %d puts, so it was committed, yet no manifest or commit record names it (the manifest and commit log were removed; restore them)", ErrDataLoss, p, VersionName(v), n)
		}
	}
	return nil
}

// profileBelow finds a profile (a directory with a manifest) below dir, or
// a directory marked as one, and returns its path; "" if there is none.
// Version directories and hidden names are not descended into.
func (s *Store) profileBelow(ctx context.Context, dir string, depth int) (string, error) {
	return s.findBelow(ctx, dir, depth, true)
}

// findBelow is profileBelow; without markers it finds only directories
// with a manifest (a profile marker alone may be a killed first put's).
func (s *Store) findBelow(ctx context.Context, dir string, depth int, markers bool) (string, error) {
	entries, err := s.fs.List(ctx, dir)
	if isNotExist(err) {
		return "", nil
	}
	if err != nil || depth >= maxKeys {
		return "", err
	}
	for _, e := range entries {
		if !e.Dir || e.Link || strings.HasPrefix(e.Name, ".") {
			continue
		}
		if _, ok := parseVersionDir(e.Name); ok && depth == 0 {
			continue
		}
		sub := path.Join(dir, e.Name)
		for _, marker := range []string{manifestName, kindName} {
			if marker == kindName && !markers {
				continue
			}
			b, _, err := s.fs.ReadFile(ctx, path.Join(sub, marker))
			if err == nil && (marker == manifestName || strings.TrimSpace(string(b)) == kindProfile) {
				return sub, nil
			}
		}
		found, err := s.findBelow(ctx, sub, depth+1, markers)
		if found != "" || err != nil {
			return found, err
		}
	}
	return "", nil
}

// checkKind fails if dir is marked as something other than want.
func (s *Store) checkKind(ctx context.Context, dir profile, want string, p profile) error {
	b, _, err := s.fs.ReadFile(ctx, dir.join(kindName))
	if isNotExist(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return kindConflict(strings.TrimSpace(string(b)), want, dir, p)
}

func kindConflict(got, want string, dir, p profile) error {
	if got == want {
		return nil
	}
	if got == kindProfile {
		return fmt.Errorf("%w: cannot create %s inside profile %s", ErrNestedProfile, p, dir)
	}
	return fmt.Errorf("%w: cannot create %s: %s holds other profiles", ErrNestedProfile, p, dir)
}

// markProfile claims, once and for all, every directory on the way to p as
// a parent of profiles and p's own as a profile. The first marker in a
// directory wins (exclusive create), so no interleaving of creations can
// put one profile above another. Run before a profile's first commit.
// Directories made before markers existed (or by pyrosome) are checked by
// their contents first, so a refused creation leaves no marker behind.
func (s *Store) markProfile(ctx context.Context, p profile) error {
	if err := s.checkCreatable(ctx, p); err != nil {
		return err
	}
	for i := 1; i <= len(p.keys); i++ {
		dir := profile{keys: p.keys[:i], dir: path.Join(p.keys[:i]...)}
		want := kindParent
		if i == len(p.keys) {
			want = kindProfile
		}
		err := s.fs.CreateExclusive(ctx, dir.join(kindName), []byte(want+"\n"))
		if errors.Is(err, fsys.ErrExist) {
			err = s.checkKind(ctx, dir, want, p)
		} else if err != nil {
			err = fmt.Errorf("create %s: %w", p, err)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
