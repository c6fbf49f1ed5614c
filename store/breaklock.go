package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"
)

// BreakLockResult is the result of BreakLock; it is the JSON body of the
// break-lock action.
type BreakLockResult struct {
	Broken bool   `json:"broken"`
	Reason string `json:"reason"`
}

// lockState is what is known about a profile's manifest lock.
type lockState struct {
	held   bool
	raw    []byte
	info   fs.FileInfo
	stale  bool   // its owner is provably gone, or it is past the stale limit
	reason string // why it is (or is not) stale, in words for the operator
}

// inspectLock reads and judges a profile's manifest lock. A lock is stale
// when its owner is on this host and its pid is no longer alive, or when it
// is older than the lock stale limit (WithLockStaleAfter). Its age is the
// time the lock records; pyrosome's locks are empty, and for them (and for
// locks that do not parse) the file's modification time is all there is.
func (s *Store) inspectLock(p profile) (*lockState, error) {
	name := p.join(lockName)
	info, err := s.fs.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &lockState{reason: fmt.Sprintf("%s is not locked", p)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect lock of %s: %w", p, err)
	}
	raw, err := s.fs.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &lockState{reason: fmt.Sprintf("%s is not locked", p)}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("inspect lock of %s: %w", p, err)
	}
	ls := &lockState{held: true, raw: raw, info: info}
	limit := s.opts.lockStaleAfter
	var li LockInfo
	known := len(bytes.TrimSpace(raw)) > 0 && json.Unmarshal(raw, &li) == nil
	since := info.ModTime()
	if known && !li.Time.IsZero() {
		since = li.Time
	}
	age := s.opts.now().Sub(since)
	if age < 0 {
		age = 0
	}
	age = age.Round(time.Millisecond)
	switch {
	case known && li.PID > 0 && li.Host == s.opts.host && !pidAlive(li.PID):
		ls.stale = true
		ls.reason = fmt.Sprintf("owner process %d on this host (%s) is gone; lock held for %s", li.PID, li.Host, age)
	case age > limit:
		ls.stale = true
		ls.reason = fmt.Sprintf("lock is %s old, past the stale limit of %s (owner %s)", age, limit, describeOwner(known, li))
	case !known:
		ls.reason = fmt.Sprintf("lock of an unknown owner (empty lock, as pyrosome writes) held for %s; breakable once older than %s", age, limit)
	case li.Host != s.opts.host:
		ls.reason = fmt.Sprintf("held by %s for %s; its host cannot be checked from here; breakable once older than %s", describeOwner(known, li), age, limit)
	default:
		ls.reason = fmt.Sprintf("held by live %s for %s; breakable once older than %s", describeOwner(known, li), age, limit)
	}
	return ls, nil
}

func describeOwner(known bool, li LockInfo) string {
	if !known {
		return "unknown"
	}
	s := fmt.Sprintf("process %d on host %q", li.PID, li.Host)
	if li.Writer != "" {
		s += fmt.Sprintf(" (%s)", li.Writer)
	}
	return s
}

// BreakLock removes a profile's manifest lock, but only when its owner is
// provably gone (same host, process not alive) or the lock is older than
// the stale limit (WithLockStaleAfter). Otherwise it changes nothing and
// says why in Reason. Every broken lock is logged at warn level.
//
// The lock is re-read just before it is removed and left alone if it
// changed (released and taken by another writer) meanwhile.
func (s *Store) BreakLock(ctx context.Context, keys []string) (*BreakLockResult, error) {
	p, err := s.resolve(keys)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ok, err := s.exists(p); err != nil {
		return nil, err
	} else if !ok {
		return nil, s.notFound(p)
	}
	ls, err := s.inspectLock(p)
	if err != nil {
		return nil, err
	}
	if !ls.held || !ls.stale {
		return &BreakLockResult{Reason: ls.reason}, nil
	}
	name := p.join(lockName)
	// Another writer may have released the judged lock and taken a fresh
	// one since; never remove that one.
	info, err := s.fs.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return &BreakLockResult{Reason: "the lock was released meanwhile"}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("break lock of %s: %w", p, err)
	}
	raw, err := s.fs.ReadFile(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("break lock of %s: %w", p, err)
	}
	if err != nil || !sameLock(ls.info, info) || !bytes.Equal(raw, ls.raw) {
		return &BreakLockResult{Reason: "the lock changed hands while it was judged; not broken"}, nil
	}
	if err := s.fs.Remove(name); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return &BreakLockResult{Reason: "the lock was released meanwhile"}, nil
		}
		return nil, fmt.Errorf("break lock of %s: %w", p, err)
	}
	s.opts.log.Warn().Str("profile", p.String()).Str("reason", ls.reason).Str("lock", string(ls.raw)).Msg("manifest lock broken")
	return &BreakLockResult{Broken: true, Reason: ls.reason}, nil
}

// sameLock reports whether two stats are of the same lock file: same file
// (inode) where the file system says so, same size and time otherwise.
func sameLock(a, b fs.FileInfo) bool {
	if a.Size() != b.Size() || !a.ModTime().Equal(b.ModTime()) {
		return false
	}
	if a.Sys() == nil || b.Sys() == nil {
		return true
	}
	return os.SameFile(a, b)
}
