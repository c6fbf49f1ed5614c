package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/quiverdb/quiver/store/fsys"
)

// manifest is manifest.json, byte-compatible with pyrosome's
// DataManifestFile (which writes it with json.dumps(indent=4)).
type manifest struct {
	LatestDataDir string `json:"latest_data_dir"`
}

func encodeManifest(version int) []byte {
	return []byte("{\n    \"latest_data_dir\": \"" + VersionName(version) + "\"\n}")
}

// readManifest returns the latest version of a profile and the manifest's
// token, or ErrNotFound.
func (s *Store) readManifest(ctx context.Context, p profile) (int, fsys.Token, error) {
	b, tok, err := s.fs.ReadFile(ctx, p.join(manifestName))
	if isNotExist(err) {
		return 0, "", s.notFound(ctx, p)
	}
	if err := s.linkInProfile(ctx, p, manifestName, err); err != nil {
		return 0, "", err
	}
	if notPlainFile(err) {
		// Replaced by a directory, a link or a special file: tampering,
		// reported as corruption (DataLoss), never followed (red team
		// round 15's h02).
		return 0, "", &CorruptionError{Path: p.join(manifestName), Err: fmt.Errorf("%w (a directory, link or special file where the manifest belongs)", err)}
	}
	if err != nil {
		return 0, "", fmt.Errorf("read manifest of %s: %w", p, err)
	}
	v, err := parseManifest(b, p)
	return v, tok, err
}

func parseManifest(b []byte, p profile) (int, error) {
	var m manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, &CorruptionError{Path: p.join(manifestName), Err: err}
	}
	n, ok := parseVersionDir(m.LatestDataDir)
	if !ok {
		return 0, &CorruptionError{Path: p.join(manifestName), Err: fmt.Errorf("latest_data_dir %q is not v<N>", m.LatestDataDir)}
	}
	return n, nil
}

// moveManifest points the manifest at version, replacing the state tok
// (empty: no manifest yet). Callers hold the manifest lock.
func (s *Store) moveManifest(ctx context.Context, p profile, version int, tok fsys.Token) error {
	if err := s.fs.Replace(ctx, p.join(manifestName), encodeManifest(version), tok); err != nil {
		return fmt.Errorf("move manifest of %s to %s: %w", p, VersionName(version), err)
	}
	return nil
}

// lockState is what is known about a held manifest lock.
type lockState struct {
	held   bool
	raw    []byte
	token  fsys.Token
	owner  Owner
	known  bool // the lock names its owner (pyrosome's locks are empty)
	age    time.Duration
	state  ownerState
	stale  bool
	reason string
}

// inspectLock reads and judges a profile's manifest lock.
func (s *Store) inspectLock(ctx context.Context, p profile) (*lockState, error) {
	name := p.join(lockName)
	raw, tok, err := s.fs.ReadFile(ctx, name)
	if isNotExist(err) {
		return &lockState{}, nil
	}
	if notPlainFile(err) {
		// Not a lock any writer makes: reported as corruption, never
		// removed by the store (red team round 15's h03).
		return nil, &CorruptionError{Path: name, Err: fmt.Errorf("%w (a directory, link or special file where the manifest lock belongs; an operator must remove it)", err)}
	}
	if err != nil {
		return nil, fmt.Errorf("read manifest lock of %s: %w", p, err)
	}
	ls := &lockState{held: true, raw: raw, token: tok}
	if len(bytes.TrimSpace(raw)) > 0 {
		if err := json.Unmarshal(raw, &ls.owner); err != nil {
			// Not a lock Quiver writes (a field of another type): no
			// owner, not the fields parsed before the one that failed,
			// which judged a pid whose namespace it could not say (red
			// team round 43's F2).
			ls.owner = Owner{}
		} else if ls.owner.Host != "" {
			ls.known = true
		}
	}
	when := ls.owner.Time
	if !ls.known || when.IsZero() {
		if st, err := s.fs.Stat(ctx, name); err == nil {
			when = st.ModTime
		}
	}
	ls.age = max(0, s.opts.now().Sub(when)).Round(time.Millisecond)
	ls.state = s.judge(ls.owner)
	limit := s.opts.lockStaleAfter
	boot := s.opts.procs.bootTime()
	switch {
	case ls.state == ownerGone:
		ls.stale = true
		ls.reason = fmt.Sprintf("owner %s is gone; lock held for %s", describeOwner(ls), ls.age)
	case ls.state == ownerUnknown && (!ls.known || ls.owner.Host == s.id.Host) && !boot.IsZero() && !when.IsZero() && when.Before(boot):
		// A lock of this host's name (or of no name: an empty lock, or
		// one whose content a crash lost) taken before this machine
		// booted: a lock that survived a machine crash. Its owner held
		// a lock for a commit, never for as long as this machine has
		// been up since (and another machine of the same name would
		// have to have held it that long too).
		ls.stale = true
		ls.state = ownerGone
		ls.reason = fmt.Sprintf("lock of %s taken at %s, before this machine booted (%s)", describeOwner(ls), when.UTC().Format(time.RFC3339), boot.UTC().Format(time.RFC3339))
	case ls.age > limit:
		ls.stale = true
		ls.reason = fmt.Sprintf("lock is %s old, past the stale limit of %s (owner %s)", ls.age, limit, describeOwner(ls))
	case !ls.known:
		ls.reason = fmt.Sprintf("lock of an unknown owner (an empty lock, as pyrosome writes) held for %s; breakable once older than %s", ls.age, limit)
	case ls.state == ownerUnknown:
		ls.reason = fmt.Sprintf("held by %s for %s; its host cannot be checked from here; breakable once older than %s", describeOwner(ls), ls.age, limit)
	default:
		ls.reason = fmt.Sprintf("held by live %s for %s; breakable once older than %s", describeOwner(ls), ls.age, limit)
	}
	return ls, nil
}

func describeOwner(ls *lockState) string {
	if !ls.known {
		return "unknown"
	}
	o := ls.owner
	s := fmt.Sprintf("process %d on host %q", o.PID, o.Host)
	if o.Writer != "" {
		s += fmt.Sprintf(" (%s)", o.Writer)
	}
	return s
}

// lockProfile takes the profile's manifest lock, waiting up to the lock
// timeout. A lock whose owner is provably gone, or older than the stale
// limit, is taken over (compare-and-swap on its content, so two writers
// cannot both take over one stale lock on storage with a real CAS). The
// returned func releases the lock if it is still ours.
func (s *Store) lockProfile(ctx context.Context, p profile) (func() error, error) {
	l, err := s.lockProfileSync(ctx, p, fsys.SyncFull)
	if err != nil {
		return nil, err
	}
	return l.unlock, nil
}

// heldLock is a manifest lock this process holds.
type heldLock struct {
	// unlock releases it if it is still ours.
	unlock func() error
	// ours reports whether it is still the lock this process took (an
	// error if it was broken or taken over since, or cannot be read).
	ours func(ctx context.Context) error
	// taken is when it was taken.
	taken time.Time
}

// lockProfileSync is lockProfile whose release has the durability
// release: a commit cycle releases with fsys.SyncNone and syncs the
// profile directory itself once its profile is idle (finishCycle).
func (s *Store) lockProfileSync(ctx context.Context, p profile, release fsys.Sync) (*heldLock, error) {
	releaseSync := release
	me, _ := json.Marshal(s.self())
	name := p.join(lockName)
	start := time.Now()
	// read reads the lock: lost says how it is not ours any more, err
	// that it cannot be read; else tok is the token to delete it with.
	read := func(ctx context.Context) (tok fsys.Token, lost string, err error) {
		raw, tok, err := s.fs.ReadFile(ctx, name)
		switch {
		case isNotExist(err):
			return "", "it was broken while held", nil
		case err != nil:
			return "", "", err
		case !bytes.Equal(raw, me):
			return "", "it was taken over while held", nil
		}
		return tok, "", nil
	}
	ours := func(ctx context.Context) error {
		_, lost, err := read(ctx)
		if err != nil {
			return fmt.Errorf("manifest lock of %s: %w", p, err)
		}
		if lost != "" {
			return fmt.Errorf("manifest lock of %s: %s", p, lost)
		}
		return nil
	}
	// stranded records a lock whose release failed: it stays, ours, and
	// the next lockProfile of this process takes it back rather than
	// wait for it as another writer's until the stale limit.
	stranded := func(err error) error {
		s.strand(p, me)
		return fmt.Errorf("release manifest lock of %s: %w", p, err)
	}
	unlock := func() error {
		tok, lost, err := read(context.WithoutCancel(ctx))
		if err != nil {
			return stranded(err)
		}
		if lost != "" {
			return fmt.Errorf("release manifest lock of %s: %s", p, lost)
		}
		if cd, ok := s.fs.(fsys.ConditionalDeleter); ok {
			// Object stores: delete the lock only as it was read, never
			// one taken over since.
			err := cd.DeleteIfMatch(context.WithoutCancel(ctx), name, tok)
			if errors.Is(err, fsys.ErrPrecondition) {
				return fmt.Errorf("release manifest lock of %s: it was taken over while held", p)
			}
			if err != nil {
				return stranded(err)
			}
			return nil
		}
		if err := fsys.DeleteSync(context.WithoutCancel(ctx), s.fs, name, releaseSync); err != nil {
			return stranded(err)
		}
		return nil
	}
	held := func() *heldLock {
		return &heldLock{unlock: unlock, ours: ours, taken: time.Now()}
	}
	deadline := start.Add(s.opts.lockTimeout)
	acquired := false
	defer func() {
		if fn := s.lockObs.Load(); fn != nil {
			(*fn)(time.Since(start), acquired)
		}
	}()
	poll := time.Millisecond
	swept := 0
	for {
		// The lock's creation need not be durable: a lock lost in a
		// machine crash protected nothing any more, and one that
		// survives (whole, or empty: its content is not synced) was
		// taken before the machine booted again, which makes it stale
		// (inspectLock). Its release is made durable (by the release,
		// or by the commit cycle once the profile is idle), so that a
		// released lock does not come back after a crash.
		err := fsys.CreateExclusiveSync(ctx, s.fs, name, me, fsys.SyncNone)
		if err == nil {
			acquired = true
			return held(), nil
		}
		if isNotExist(err) && swept < 3 {
			// The lock's temp was removed before its link (a sweep with
			// no age; red team round 21's v03): take it again.
			swept++
			continue
		}
		if !errors.Is(err, fsys.ErrExist) {
			// The storage may have taken the create all the same (no
			// answer; a refusal from a gateway that retried it upstream;
			// a request it takes late): the lock would then be ours and
			// nobody's to release, and every writer, this process's too,
			// would wait for it until it is stale. It is stranded, as
			// one whose release failed.
			s.strand(p, me)
			return nil, fmt.Errorf("lock manifest of %s: %w", p, raced(p, err))
		}
		ls, err := s.inspectLock(ctx, p)
		if err != nil {
			return nil, err
		}
		if ls.held && bytes.Equal(ls.raw, me) {
			// This very create made it, though answered "exists" (a
			// gateway whose own retry met its first attempt: red team
			// round 50's p02).
			acquired = true
			return held(), nil
		}
		if ls.held && ls.stale {
			if err := fsys.ReplaceSync(ctx, s.fs, name, me, ls.token, fsys.SyncNone); err == nil {
				s.opts.log.Warn().Str("profile", p.String()).Str("reason", ls.reason).Str("lock", string(ls.raw)).Msg("stale manifest lock taken over")
				acquired = true
				return held(), nil
			}
			continue
		}
		if !ls.held {
			continue
		}
		if s.takeBackLock(ctx, p, ls, me) {
			acquired = true
			return held(), nil
		}
		if !time.Now().Before(deadline) {
			// The last holder seen may have held it for a moment only:
			// several writers taking it in turn keep it held as long as
			// one that never lets go (red team round 40's f05).
			return nil, fmt.Errorf("%w: %s is locked by another writer: it was held by other writers for all of the %s this put waited; last seen: %s", ErrLockTimeout, p, s.opts.lockTimeout, ls.reason)
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		poll = min(2*poll, s.opts.lockPoll)
	}
}

// strand records raw as a lock of p this process may hold with nobody to
// release it (stranded), and removes it in the background once the
// storage answers: this process takes it back when it next locks p, but
// another server's writers would wait for it until it is stale (ten
// minutes by default), should this process not come back to p.
func (s *Store) strand(p profile, raw []byte) {
	c := &s.state(p).commit
	c.stranded.add(raw)
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		// Tried until the schedule ends, even while the lock is absent
		// or another's: a create the storage takes late may land
		// whenever (red team round 50's p07, 4-6 s late).
		for delay := strandedRetry; delay <= 64*strandedRetry; delay *= 2 {
			t := time.NewTimer(delay)
			select {
			case <-s.quit:
				t.Stop()
				return
			case <-t.C:
			}
			if !c.stranded.take(raw) {
				return // taken back meanwhile (or forgotten for newer ones)
			}
			if s.dropLock(p, raw) {
				return
			}
			c.stranded.add(raw)
		}
		c.stranded.take(raw) // (its last chance was this process's next lock)
	}()
}

// strandedRetry is the first wait of strand's removal (doubled at each
// attempt, seven in all). A variable for tests.
var strandedRetry = time.Second

// dropLock removes p's manifest lock if it holds raw, and reports
// whether it did.
func (s *Store) dropLock(p profile, raw []byte) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	name := p.join(lockName)
	got, tok, err := s.fs.ReadFile(ctx, name)
	if err != nil || !bytes.Equal(got, raw) {
		return false
	}
	if cd, ok := s.fs.(fsys.ConditionalDeleter); ok {
		err = cd.DeleteIfMatch(ctx, name, tok)
	} else {
		err = fsys.DeleteSync(ctx, s.fs, name, fsys.SyncFull)
	}
	if err != nil && !isNotExist(err) {
		return false
	}
	s.opts.log.Warn().Str("profile", p.String()).Str("lock", string(raw)).Msg("removed a manifest lock this process had failed to release or could not tell it had taken")
	return true
}

// takeBackLock takes over the held lock ls (compare-and-swap, with me)
// when it is one this process failed to release or may have made without
// knowing (stranded, byte for byte: its owner's time tells one lock of
// this process from another), which nobody holds. It reports whether it
// did.
func (s *Store) takeBackLock(ctx context.Context, p profile, ls *lockState, me []byte) bool {
	c := &s.state(p).commit
	if !c.stranded.take(ls.raw) {
		return false
	}
	if err := fsys.ReplaceSync(ctx, s.fs, p.join(lockName), me, ls.token, fsys.SyncNone); err != nil {
		if !errors.Is(err, fsys.ErrPrecondition) {
			// Still ours: a later attempt takes it back.
			c.stranded.add(ls.raw)
		}
		return false
	}
	s.opts.log.Warn().Str("profile", p.String()).Str("lock", string(ls.raw)).Msg("took back a manifest lock this process had failed to release")
	return true
}

// BreakLockResult is the outcome of BreakLock.
type BreakLockResult struct {
	Broken bool   `json:"broken"`
	Reason string `json:"reason"`
}

// BreakLock removes a profile's manifest lock, but only when its owner is
// provably gone (same host and boot, and its process is not running or its
// pid now belongs to a later process) or the lock is older than the stale
// limit. Otherwise it changes nothing and says why. The lock is removed
// only if it still holds exactly what was judged. Every broken lock is
// logged at warn level.
func (s *Store) BreakLock(ctx context.Context, keys []string) (*BreakLockResult, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	_, _, merr := s.readManifest(ctx, p)
	if merr != nil && !errors.As(merr, new(*CorruptionError)) && !errors.Is(merr, ErrNotFound) {
		return nil, merr
	}
	ls, err := s.inspectLock(ctx, p)
	if err != nil {
		return nil, err
	}
	if !ls.held {
		if errors.Is(merr, ErrNotFound) {
			return nil, merr
		}
		return &BreakLockResult{Reason: "the profile is not locked"}, nil
	}
	if !ls.stale {
		return &BreakLockResult{Reason: ls.reason}, nil
	}
	name := p.join(lockName)
	raw, _, err := s.fs.ReadFile(ctx, name)
	if isNotExist(err) {
		return &BreakLockResult{Reason: "the lock was released meanwhile"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("break lock of %s: %w", p, err)
	}
	if !bytes.Equal(raw, ls.raw) {
		return &BreakLockResult{Reason: "the lock changed hands while it was judged; not broken"}, nil
	}
	if err := s.fs.Delete(ctx, name); err != nil {
		return nil, fmt.Errorf("break lock of %s: %w", p, err)
	}
	s.opts.log.Warn().Str("profile", p.String()).Str("reason", ls.reason).Str("lock", string(ls.raw)).Msg("manifest lock broken")
	return &BreakLockResult{Broken: true, Reason: ls.reason}, nil
}
