package store

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/quiverdb/quiver/store/fsys"
)

// committer gathers the commits of one profile in this process: the first
// put to arrive leads a commit cycle for everything queued behind it (group
// commit), so concurrent appends share one lock, one log segment and one
// set of syncs.
type committer struct {
	ps      *profileState
	mu      sync.Mutex
	queue   []*commitReq
	leading bool
}

type commitReq struct {
	ctx  context.Context
	st   *staged
	done chan commitResult
}

// commitResult is what a commit cycle decided for one put.
type commitResult struct {
	rec      *CommitRecord // committed
	replayed *CommitRecord // its request id was committed before
	retarget bool          // its version is no longer the latest: move it
	carry    []*CommitRecord
	err      error
}

// commitStaged commits st (with whatever else is queued) and returns the
// decision for it.
func (s *Store) commitStaged(ctx context.Context, ps *profileState, st *staged) commitResult {
	req := &commitReq{ctx: ctx, st: st, done: make(chan commitResult, 1)}
	c := &ps.commit
	c.mu.Lock()
	c.queue = append(c.queue, req)
	lead := !c.leading
	c.leading = true
	c.mu.Unlock()
	if lead {
		s.runCycle(c)
		c.mu.Lock()
		more := len(c.queue) > 0
		if !more {
			c.leading = false
		}
		c.mu.Unlock()
		if more {
			go s.lead(c)
		}
	}
	return <-req.done
}

// lead runs commit cycles until the queue is empty.
func (s *Store) lead(c *committer) {
	for {
		s.runCycle(c)
		c.mu.Lock()
		if len(c.queue) == 0 {
			c.leading = false
			c.mu.Unlock()
			return
		}
		c.mu.Unlock()
	}
}

func (s *Store) runCycle(c *committer) {
	c.mu.Lock()
	batch := c.queue
	c.queue = nil
	c.mu.Unlock()
	var live []*commitReq
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.done <- commitResult{err: err}
			continue
		}
		live = append(live, r)
	}
	if len(live) == 0 {
		return
	}
	// Appends and writes of one batch commit in two cycles, appends first:
	// an append's acknowledgement then leaves before the write commits, so
	// a client that sees the write acknowledged and then the append never
	// finds the append in the older version (they were concurrent, so
	// either order is linearizable; this one is also what clients expect).
	var appends, writes []*commitReq
	for _, r := range live {
		if r.st.mode == ModeAppend {
			appends = append(appends, r)
		} else {
			writes = append(writes, r)
		}
	}
	if len(appends) > 0 && len(writes) > 0 {
		c.mu.Lock()
		c.queue = append(writes, c.queue...)
		c.mu.Unlock()
		live = appends
	}
	res := s.safeCycle(c.ps, live)
	for i, r := range live {
		r.done <- res[i]
	}
}

// safeCycle runs a cycle and turns a panic in it (a bug) into an error
// for each put of the batch, so that the others waiting on it and the
// profile's next cycles are not stuck, and a cycle on a goroutine of its
// own does not take the server down. Whether a put of the batch committed
// is then unknown: the error says to retry, which a request id makes safe.
func (s *Store) safeCycle(ps *profileState, batch []*commitReq) (res []commitResult) {
	defer func() {
		if v := recover(); v != nil {
			pe := &PanicError{Profile: ps.p.String(), Value: v, Stack: debug.Stack()}
			if ps.mu.TryLock() { // (held only if the panic came while holding it)
				ps.log = newLogView() // re-read: the cycle may have stopped half way
				ps.mu.Unlock()
			}
			res = make([]commitResult, len(batch))
			for i := range res {
				res[i].err = fmt.Errorf("%w: %s: the commit failed unexpectedly; whether it committed is unknown: retry with the same request_id: %w", ErrUnavailable, ps.p, pe)
			}
		}
	}()
	return s.cycle(ps, batch)
}

// cycle commits a batch under the profile's manifest lock: the one place
// where anything becomes committed (docs/architecture.md).
func (s *Store) cycle(ps *profileState, batch []*commitReq) []commitResult {
	p := ps.p
	res := make([]commitResult, len(batch))
	fail := func(err error) []commitResult {
		for i := range res {
			if res[i].rec == nil && res[i].replayed == nil && !res[i].retarget && res[i].carry == nil {
				res[i].err = err
			}
		}
		return res
	}
	// The cycle outlives any one client: it may commit others' puts.
	ctx, cancel := context.WithTimeout(context.Background(), s.opts.lockTimeout+time.Minute)
	defer cancel()
	// Appends first, then writes: the batch is concurrent, and this order
	// lands every append of it in the version that is latest now.
	order := make([]int, len(batch))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool {
		sa, sb := batch[order[a]].st, batch[order[b]].st
		if (sa.mode == ModeAppend) != (sb.mode == ModeAppend) {
			return sa.mode == ModeAppend
		}
		// Writes by version: the highest commits last and is the latest.
		return sa.mode != ModeAppend && sa.version < sb.version
	})
	unlock, err := s.lockProfile(ctx, p)
	if err != nil {
		return fail(err)
	}
	defer func() {
		if err := unlock(); err != nil {
			s.opts.log.Error().Err(err).Str("profile", p.String()).Msg("manifest lock")
		}
	}()
	for attempt := 0; ; attempt++ {
		for i := range res {
			res[i] = commitResult{}
		}
		latest, tok, err := s.readManifest(ctx, p)
		missing := errors.Is(err, ErrNotFound)
		if err != nil && !missing {
			return fail(err)
		}
		if err := s.syncLog(ctx, ps); err != nil {
			return fail(err)
		}
		if latest, tok, missing, err = s.repairManifest(ctx, ps, latest, tok, missing); err != nil {
			return fail(err)
		}
		ps.mu.Lock()
		head, headHash := ps.log.head, ps.log.headHash
		ps.mu.Unlock()

		var recs []*CommitRecord
		var accepted []int
		ids := map[string]int{} // request id → position in recs
		created := false
		newest := -1 // highest version a write of this batch commits
		// cur is the latest version as the cycle commits: a write accepted
		// earlier in this cycle is the latest for what follows it.
		cur := latest
		var adopted []*CommitRecord
		if head == 0 && !missing {
			// A profile older than the commit log: its records are taken
			// into the log first (chained, signed), and from then on only
			// the log is read.
			if adopted, err = s.adoptLegacy(ctx, ps); err != nil {
				return fail(err)
			}
		}
		now := s.opts.now().UTC()
		for _, i := range order {
			st := batch[i].st
			if id := st.o.RequestID; id != "" {
				ps.mu.Lock()
				prev := ps.log.byRequest[id]
				ps.mu.Unlock()
				if prev != nil {
					res[i].replayed = prev
					continue
				}
				if _, dup := ids[id]; dup {
					continue // answered after the commit, from the first
				}
			}
			move := false
			switch {
			case st.mode == ModeAppend:
				move = missing || st.version != cur
			case st.create && (!missing || created):
				// Another client created the profile: append to it.
				move = true
			case !missing && st.version < cur:
				// A write whose number a faster write overtook: it must
				// not commit below the latest (it would be acknowledged
				// and hidden). It becomes a new version above.
				move = true
			}
			if move && (!st.locked || (missing && st.mode == ModeAppend)) {
				res[i].retarget = true
				continue
			}
			if move {
				// Overtaken before: move it now, holding the lock, so
				// that nothing can overtake it again.
				if err := s.restage(ctx, ps, st, cur); err != nil {
					res[i].err = err
					continue
				}
			}
			if st.o.carry != nil && st.o.carry.version != cur {
				// A write committed while the compaction ran: its result
				// would hide that write. It starts over from the latest.
				res[i].err = errCompactionStale
				continue
			}
			if st.o.carry != nil {
				if late := s.lateRecords(ps, st.o.carry, recs); len(late) > 0 {
					if !st.carryLocked {
						res[i].carry = late
						continue
					}
					// The compaction lost the race to appends before: it
					// takes in the few late ones holding the lock, so
					// that it converges.
					if err := s.carryIn(ctx, ps, st, late); err != nil {
						res[i].err = err
						continue
					}
				}
			}
			if err := s.checkStaged(ctx, st); err != nil {
				res[i].err = err
				continue
			}
			if missing {
				created = true
			}
			c := &CommitRecord{Path: ProfilePath(p.keys), Keys: p.keys, Version: VersionName(st.version), Index: st.index,
				Mode: st.mode, Format: st.format, Rows: st.rows, SchemaVersion: st.schemaV, Files: st.files,
				Committed: now, Writer: s.writerOf(st.o), RequestID: st.o.RequestID, Metadata: st.o.Metadata,
				VersionInfo: st.infoHash}
			if c.Files == nil {
				c.Files = []FileRecord{}
			}
			if st.mode == ModeWrite {
				newest = max(newest, st.version)
				cur = max(cur, st.version)
			}
			if st.o.RequestID != "" {
				ids[st.o.RequestID] = len(recs)
			}
			recs = append(recs, c)
			accepted = append(accepted, i)
		}
		if len(recs) == 0 {
			return res
		}
		if missing {
			if err := s.markProfile(ctx, p); err != nil {
				for _, i := range accepted {
					res[i].err = err
				}
				return res
			}
		}
		all := append(append([]*CommitRecord(nil), adopted...), recs...)
		for _, c := range all {
			head++
			c.Seq, c.Prev = head, headHash
			if err := c.encodeLine(s.opts.signer); err != nil {
				return fail(fmt.Errorf("commit %s: %w", p, err))
			}
			headHash = c.Hash()
		}
		if err := s.appendSegment(ctx, ps, all); err != nil {
			if errors.Is(err, fsys.ErrExist) && attempt < 5 {
				// Another committer (whose lock we took over, or one
				// ignoring it) got there first: read the log again.
				continue
			}
			return fail(fmt.Errorf("commit %s: %w", p, err))
		}
		// Committed. The manifest follows the highest version written.
		if newest >= 0 && (missing || newest > latest) {
			if err := s.advanceManifest(ctx, p, newest, tok, missing); err != nil {
				s.opts.log.Error().Err(err).Str("profile", p.String()).Msg("committed, but the manifest did not move; the next commit moves it")
				for _, i := range accepted {
					if batch[i].st.mode == ModeWrite {
						res[i].err = fmt.Errorf("%w: %s %s is committed but not yet the latest version: %v", ErrUnavailable, p, VersionName(batch[i].st.version), err)
					}
				}
			}
		}
		for k, i := range accepted {
			// Committed, even where res[i].err says the manifest did not
			// follow: the put's files must stay.
			res[i].rec = recs[k]
		}
		for _, i := range order {
			if id := batch[i].st.o.RequestID; id != "" && res[i].rec == nil && res[i].replayed == nil && !res[i].retarget && res[i].carry == nil && res[i].err == nil {
				if k, ok := ids[id]; ok {
					res[i].replayed = recs[k]
				}
			}
		}
		return res
	}
}

// adoptLegacy reads the records of a data directory older than the commit
// log (vN/.<i>.commit.json, by version then index) as records to take into
// the log. Callers hold the lock and have found the log empty.
func (s *Store) adoptLegacy(ctx context.Context, ps *profileState) ([]*CommitRecord, error) {
	vers, err := s.versionNumbers(ctx, ps)
	if err != nil {
		return nil, err
	}
	var out []*CommitRecord
	for _, v := range vers {
		recs, err := s.legacyRecords(ctx, ps.p, v)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			c := *r
			c.Seq, c.Prev, c.Signer, c.Sig, c.line = 0, "", "", "", nil
			c.Adopted = true
			if c.Files == nil {
				c.Files = []FileRecord{}
			}
			out = append(out, &c)
		}
	}
	return out, nil
}

// errCompactionStale: the version a compaction read is no longer the
// latest when it commits.
var errCompactionStale = errors.New("a newer version was committed while the compaction ran")

// checkStaged makes sure a put's files are still there before its record
// vouches for them (sweep removes uncommitted files once they are old; a
// writer paused that long must not commit a record of files that are
// gone).
func (s *Store) checkStaged(ctx context.Context, st *staged) error {
	names := make([]string, 0, len(st.files)+1)
	if st.mode == ModeWrite {
		// The version must still be the one this put reserved: a version
		// directory swept while the put paused and reserved again by
		// another write holds another .version.json.
		b, _, err := s.fs.ReadFile(ctx, st.p.join(VersionName(st.version), versionInfoName))
		if err != nil || sha256Hex(b) != st.infoHash {
			return fmt.Errorf("%w: %s: the put's version %s was removed before its commit (by sweep after a long pause?)", ErrUnavailable, st.p, VersionName(st.version))
		}
	}
	for _, f := range st.files {
		names = append(names, st.p.join(f.Path))
	}
	for _, n := range names {
		e, err := s.fs.Stat(ctx, n)
		if err != nil {
			return fmt.Errorf("%w: %s: a file of the put is gone before its commit (removed by sweep after a long pause?): %v", ErrUnavailable, st.p, err)
		}
		for _, f := range st.files {
			if st.p.join(f.Path) == n && e.Size != f.Bytes {
				return fmt.Errorf("%w: %s: a file of the put changed before its commit", ErrUnavailable, st.p)
			}
		}
	}
	return nil
}

// lateRecords lists the commits to carry.version after carry.seq: in the
// log and in the batch being built (whose appends commit first).
func (s *Store) lateRecords(ps *profileState, carry *carryFrom, batch []*CommitRecord) []*CommitRecord {
	vname := VersionName(carry.version)
	var late []*CommitRecord
	ps.mu.Lock()
	for _, r := range ps.log.byVersion[carry.version] {
		if r.Seq > carry.seq && r.Mode == ModeAppend {
			late = append(late, r)
		}
	}
	ps.mu.Unlock()
	for _, r := range batch {
		if r.Version == vname && r.Mode == ModeAppend {
			late = append(late, r)
		}
	}
	return late
}

// repairManifest moves a manifest that lags behind the log (a writer died
// between its commit and the manifest move) to the newest written version.
// Callers hold the lock.
func (s *Store) repairManifest(ctx context.Context, ps *profileState, latest int, tok fsys.Token, missing bool) (int, fsys.Token, bool, error) {
	ps.mu.Lock()
	mw := ps.log.maxWrite()
	retired := mw >= 0 && ps.log.retired[mw] != nil
	ps.mu.Unlock()
	if mw < 0 || retired || (!missing && mw <= latest) {
		return latest, tok, missing, nil
	}
	if err := s.advanceManifest(ctx, ps.p, mw, tok, missing); err != nil {
		return 0, "", false, err
	}
	s.opts.log.Warn().Str("profile", ps.p.String()).Str("version", VersionName(mw)).Msg("moved a manifest that lagged behind the commit log")
	latest, tok, err := s.readManifest(ctx, ps.p)
	return latest, tok, false, err
}

// advanceManifest moves the manifest to version unless it already names
// it or a later one (compare-and-swap; it never moves backwards).
func (s *Store) advanceManifest(ctx context.Context, p profile, version int, tok fsys.Token, missing bool) error {
	if missing {
		tok = ""
	}
	for range 5 {
		err := s.moveManifest(ctx, p, version, tok)
		if err == nil || !errors.Is(err, fsys.ErrPrecondition) {
			return err
		}
		cur, t, rerr := s.readManifest(ctx, p)
		switch {
		case errors.Is(rerr, ErrNotFound):
			tok = ""
		case rerr != nil:
			return rerr
		case cur >= version:
			return nil
		default:
			tok = t
		}
	}
	return fmt.Errorf("move manifest of %s: it kept changing", p)
}

// settleManifest runs an empty commit cycle's repair: a replayed write
// whose manifest move was lost becomes the latest version now.
func (s *Store) settleManifest(ctx context.Context, ps *profileState) error {
	ps.mu.Lock()
	mw := ps.log.maxWrite()
	ps.mu.Unlock()
	latest, _, err := s.readManifest(ctx, ps.p)
	if err == nil && latest >= mw {
		return nil
	}
	unlock, err := s.lockProfile(ctx, ps.p)
	if err != nil {
		return err
	}
	defer func() { _ = unlock() }()
	latest, tok, err := s.readManifest(ctx, ps.p)
	missing := errors.Is(err, ErrNotFound)
	if err != nil && !missing {
		return err
	}
	if err := s.syncLog(ctx, ps); err != nil {
		return err
	}
	_, _, _, err = s.repairManifest(ctx, ps, latest, tok, missing)
	return err
}
