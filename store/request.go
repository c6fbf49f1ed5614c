package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"syscall"
)

// requestsDir holds one record per request id of a profile, so a retried
// put (same request_id, same profile) returns the first put's commit and
// writes nothing. It is hidden, so pyrosome and listings ignore it.
const requestsDir = ".requests"

// maxRequestID bounds a client-chosen request id.
const maxRequestID = 256

func requestNames(p profile, id string) (done, pending string) {
	h := sha256.Sum256([]byte(id))
	base := p.join(requestsDir, hex.EncodeToString(h[:]))
	return base + ".json", base + ".pending"
}

// putOnce runs put at most once per request id: a finished id returns its
// first commit record (Replayed set); an id in flight elsewhere is
// ErrRequestInProgress.
func (s *Store) putOnce(ctx context.Context, p profile, o PutOptions, put func() (*CommitRecord, error)) (*CommitRecord, error) {
	if len(o.RequestID) > maxRequestID {
		return nil, fmt.Errorf("%w: request_id longer than %d bytes", ErrInvalidArgument, maxRequestID)
	}
	done, pending := requestNames(p, o.RequestID)
	if c, err := s.readRequest(done); c != nil || err != nil {
		return c, err
	}
	// A put that creates the profile must pass the nesting checks before
	// anything is created on disk.
	if ok, err := s.exists(p); err != nil {
		return nil, err
	} else if !ok {
		if err := s.checkCreatable(p); err != nil {
			return nil, err
		}
	}
	if err := s.fs.MkdirAll(p.join(requestsDir)); err != nil && !errors.Is(err, syscallENOTDIR) {
		return nil, fmt.Errorf("put to %s: %w", p, err)
	}
	info, _ := json.Marshal(LockInfo{Host: s.opts.host, PID: s.opts.pid, Time: s.opts.now().UTC(), Writer: s.opts.writer})
	for attempt := 0; ; attempt++ {
		err := s.fs.CreateExclusive(pending, info)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || attempt > 0 {
			if errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("%w: a put with this request_id on %s is running", ErrRequestInProgress, p)
			}
			return nil, fmt.Errorf("put to %s: %w", p, err)
		}
		b, rerr := s.fs.ReadFile(pending)
		if rerr != nil && !errors.Is(rerr, fs.ErrNotExist) {
			return nil, fmt.Errorf("put to %s: %w", p, rerr)
		}
		if rerr == nil && !s.ownerGone(b) {
			return nil, fmt.Errorf("%w: a put with this request_id on %s is running", ErrRequestInProgress, p)
		}
		// The owner died: its put may have committed before the record
		// was written; the commit records say.
		if c, err := s.findRequest(ctx, p, o.RequestID); c != nil || err != nil {
			return c, err
		}
		if err := s.fs.Remove(pending); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("put to %s: %w", p, err)
		}
	}
	defer func() { _ = s.fs.Remove(pending) }()
	if c, err := s.readRequest(done); c != nil || err != nil {
		return c, err
	}
	c, err := put()
	if err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	if err := s.fs.CreateExclusive(done, b); err != nil && !errors.Is(err, fs.ErrExist) {
		s.opts.log.Warn().Err(err).Str("profile", p.String()).Msg("commit done, request record not written")
	}
	return c, nil
}

func (s *Store) readRequest(name string) (*CommitRecord, error) {
	b, err := s.fs.ReadFile(name)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscallENOTDIR) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	c, err := ParseCommitRecord(b)
	if err != nil {
		return nil, &CorruptionError{Path: name, Err: err}
	}
	c.Replayed = true
	return c, nil
}

// findRequest scans a profile's commit records for a request id.
func (s *Store) findRequest(ctx context.Context, p profile, id string) (*CommitRecord, error) {
	entries, err := s.fs.ReadDir(p.dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	for _, v := range versionDirs(entries) {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		ve, err := s.fs.ReadDir(p.join(VersionName(v)))
		if err != nil {
			continue
		}
		recs, err := s.commitRecords(p, v, ve)
		if err != nil {
			return nil, err
		}
		for _, r := range recs {
			if r.RequestID == id {
				r.Replayed = true
				return r, nil
			}
		}
	}
	return nil, nil
}

// ownerGone reports whether the process that wrote a LockInfo is provably
// dead (same host, no such pid) or the lock is older than the stale limit.
func (s *Store) ownerGone(b []byte) bool {
	var li LockInfo
	if json.Unmarshal(b, &li) != nil {
		return false
	}
	if li.Host == s.opts.host && li.PID > 0 && !pidAlive(li.PID) {
		return true
	}
	return !li.Time.IsZero() && s.opts.now().Sub(li.Time) > s.opts.lockStaleAfter
}

// pidAlive reports whether a process exists on this host.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
