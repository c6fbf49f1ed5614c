package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"time"
)

// manifest is manifest.json, byte-compatible with pyrosome's
// DataManifestFile (which writes it with json.dumps(indent=4)).
type manifest struct {
	LatestDataDir string `json:"latest_data_dir"`
}

func encodeManifest(version int) []byte {
	return []byte("{\n    \"latest_data_dir\": \"" + VersionName(version) + "\"\n}")
}

// readManifest returns the latest version of a profile, or ErrNotFound.
func (s *Store) readManifest(p profile) (int, error) {
	b, err := s.fs.ReadFile(p.join(manifestName))
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscallENOTDIR) {
		return 0, s.notFound(p)
	}
	if err != nil {
		return 0, fmt.Errorf("read manifest of %s: %w", p, err)
	}
	return parseManifest(b, p)
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

// LockInfo is the content of manifest.json.write_lock: who holds it. pyrosome
// writes an empty lock file, which parses as a zero LockInfo.
type LockInfo struct {
	Host   string    `json:"host"`
	PID    int       `json:"pid"`
	Time   time.Time `json:"time"`
	Writer string    `json:"writer,omitempty"`
}

// lockManifest takes the profile's manifest lock, waiting up to the lock
// timeout. The returned func releases it.
func (s *Store) lockManifest(ctx context.Context, p profile) (func() error, error) {
	info, _ := json.Marshal(LockInfo{Host: s.opts.host, PID: s.opts.pid, Time: s.opts.now().UTC(), Writer: s.opts.writer})
	name := p.join(lockName)
	start := time.Now()
	deadline := start.Add(s.opts.lockTimeout)
	acquired := false
	defer func() {
		if fn := s.lockObs.Load(); fn != nil {
			(*fn)(time.Since(start), acquired)
		}
	}()
	for {
		err := s.fs.CreateExclusive(name, info)
		if err == nil {
			acquired = true
			return func() error {
				if err := s.fs.Remove(name); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return fmt.Errorf("release manifest lock of %s: %w", p, err)
				}
				return nil
			}, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, fmt.Errorf("lock manifest of %s: %w", p, err)
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("%w: %s is locked by another writer for more than %s (if its owner died, break the lock)", ErrLockTimeout, p, s.opts.lockTimeout)
		}
		t := time.NewTimer(s.opts.lockPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}

// commitManifest points the manifest at version unless it already points
// at the same or a newer one: the manifest never moves backwards.
func (s *Store) commitManifest(ctx context.Context, p profile, version int) (err error) {
	unlock, err := s.lockManifest(ctx, p)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, unlock()) }()
	cur, rerr := s.readManifest(p)
	switch {
	case rerr == nil:
		if cur >= version {
			return nil
		}
	case errors.Is(rerr, ErrNotFound):
	default:
		return rerr
	}
	tmp, err := s.fs.CreateTemp(p.dir, ".json")
	if err != nil {
		return fmt.Errorf("write manifest of %s: %w", p, err)
	}
	if _, err := tmp.Write(encodeManifest(version)); err != nil {
		return errors.Join(fmt.Errorf("write manifest of %s: %w", p, err), tmp.Abort())
	}
	if err := tmp.Publish(p.join(manifestName), true, false); err != nil {
		return errors.Join(fmt.Errorf("write manifest of %s: %w", p, err), tmp.Abort())
	}
	return nil
}
