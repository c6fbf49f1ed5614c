package store

import (
	"bytes"
	"context"
	"io"
	"os"
	"path"
	"strconv"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/apache/arrow-go/v18/parquet/file"
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
		// The put may have committed without its request record (its owner
		// could not write it, or died): the commit records say.
		if c, err := s.findRecord(ctx, p, o.RequestID); c != nil || err != nil {
			if err != nil {
				return nil, err
			}
			return s.replayed(ctx, p, c)
		}
		if rerr == nil && !s.ownerGone(b) {
			return nil, fmt.Errorf("%w: a put with this request_id on %s is running", ErrRequestInProgress, p)
		}
		// The owner is gone; it may have died between publishing its file
		// and writing the commit record.
		if c, err := s.rollForward(ctx, p, o.RequestID); c != nil || err != nil {
			return c, err
		}
		if err := s.fs.Remove(pending); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("put to %s: %w", p, err)
		}
	}
	keepPending := false
	defer func() {
		if !keepPending {
			_ = s.fs.Remove(pending)
		}
	}()
	if c, err := s.readRequest(done); c != nil || err != nil {
		return c, err
	}
	c, err := put()
	if err != nil {
		return nil, err
	}
	b, _ := json.MarshalIndent(c, "", "  ")
	if err := s.fs.CreateExclusive(done, b); err != nil && !errors.Is(err, fs.ErrExist) {
		// The pending marker stays: a retry then scans the commit records
		// and finds this one instead of writing the rows again.
		keepPending = true
		s.opts.log.Warn().Err(err).Str("profile", p.String()).Msg("commit done, request record not written")
	}
	return c, nil
}

// replayed finishes what a replayed put may have left undone: a write
// killed between its commit record and the manifest move is moved now (the
// manifest still never goes backwards).
func (s *Store) replayed(ctx context.Context, p profile, c *CommitRecord) (*CommitRecord, error) {
	if c == nil || c.Mode != ModeWrite {
		return c, nil
	}
	v, ok := parseVersionDir(c.Version)
	if !ok {
		return c, nil
	}
	if err := s.commitManifest(ctx, p, v); err != nil {
		return nil, fmt.Errorf("replay %s %s: %w", p, c.Version, err)
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

// findRecord scans a profile's commit records for a request id.
func (s *Store) findRecord(ctx context.Context, p profile, id string) (*CommitRecord, error) {
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

// pidAlive reports whether a process exists on this host. A zombie (killed
// but not yet reaped by its parent) is dead: it will never finish a put or
// release a lock.
func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	b, rerr := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if rerr != nil {
		return true // no procfs: trust kill(2)
	}
	// The state follows the command name, which is in parentheses and may
	// itself hold spaces or parentheses.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) && b[i+2] == 'Z' {
		return false
	}
	return true
}

// rollForward looks for a root data file without a commit record whose
// footer carries the request id, in the versions the manifest has reached,
// and writes the commit record it lacks.
func (s *Store) rollForward(ctx context.Context, p profile, id string) (*CommitRecord, error) {
	latest, err := s.readManifest(p)
	if err != nil {
		return nil, nil //nolint:nilerr // no manifest: nothing was published
	}
	for v := latest; v >= 0; v-- {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		vname := VersionName(v)
		entries, err := s.fs.ReadDir(p.join(vname))
		if err != nil {
			continue
		}
		recorded := map[int]bool{}
		for _, e := range entries {
			if i, ok := parseIndexed(commitRe, e.Name()); ok {
				recorded[i] = true
			}
		}
		for _, e := range entries {
			i, f, ok := parseDataFile(e.Name())
			if !ok || f != FormatParquet || recorded[i] || e.IsDir() {
				continue
			}
			c, err := s.recordFromFooter(p, v, i, id)
			if err != nil || c == nil {
				continue
			}
			b, _ := json.MarshalIndent(c, "", "  ")
			if err := s.fs.CreateExclusive(p.join(vname, commitName(i)), b); err != nil && !errors.Is(err, fs.ErrExist) {
				return nil, fmt.Errorf("roll forward %s %s index %d: %w", p, vname, i, err)
			}
			s.opts.log.Warn().Str("profile", p.String()).Str("version", vname).Int("index", i).Msg("rolled forward a put whose writer died before its commit record")
			// Whoever wrote the record (us or a racing retry), it is the one.
			b, err = s.fs.ReadFile(p.join(vname, commitName(i)))
			if err != nil {
				return nil, err
			}
			rec, err := ParseCommitRecord(b)
			if err != nil {
				return nil, &CorruptionError{Path: p.join(vname, commitName(i)), Err: err}
			}
			rec.Replayed = true
			return rec, nil
		}
	}
	return nil, nil
}

// recordFromFooter builds the commit record of root file i of version v if
// its footer names request id; nil otherwise.
func (s *Store) recordFromFooter(p profile, v, i int, id string) (*CommitRecord, error) {
	vname := VersionName(v)
	rel := path.Join(vname, dataFileName(i, FormatParquet))
	f, err := s.fs.Open(p.join(rel))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pr, err := file.NewParquetReader(f)
	if err != nil {
		return nil, err
	}
	kv := pr.MetaData().KeyValueMetadata()
	got := kv.FindValue(requestIDKey)
	if got == nil || *got != id {
		return nil, nil
	}
	rows := pr.NumRows()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return nil, err
	}
	c := &CommitRecord{Path: ProfilePath(p.keys), Keys: p.keys, Version: vname, Index: i, Mode: ModeAppend, Format: FormatParquet,
		Rows: rows, Files: []FileRecord{{Path: rel, Rows: rows, Bytes: n, SHA256: hex.EncodeToString(h.Sum(nil))}},
		Committed: s.opts.now().UTC(), RequestID: id}
	if sv := kv.FindValue(SchemaVersionKey); sv != nil {
		c.SchemaVersion = *sv
	}
	if w := kv.FindValue(writerKey); w != nil {
		c.Writer = *w
	}
	if md := kv.FindValue(metadataKey); md != nil && *md != "" && json.Valid([]byte(*md)) {
		c.Metadata = json.RawMessage(*md)
	}
	return c, nil
}
