package store

import (
	"context"
	"time"
)

// AutoCompact configures automatic compaction (WithAutoCompact): once the
// latest version of a profile holds more than Files files smaller than
// SmallBytes, the put that committed the last of them starts a compaction
// of that version in the background (Compact: the same rows in a new
// version of few large files; appends racing it are carried into it, or
// it starts over). At most one runs per profile at a time.
type AutoCompact struct {
	// Files is the number of small files a version may hold before it is
	// compacted; 0 turns automatic compaction off.
	Files int
	// SmallBytes is the size below which a file counts as small (default
	// 16 MiB).
	SmallBytes int64
	// TargetFileBytes is the compacted files' size (CompactOptions; default
	// 512 MiB).
	TargetFileBytes int64
}

// DefaultAutoCompactSmallBytes is AutoCompact.SmallBytes when 0.
const DefaultAutoCompactSmallBytes = 16 << 20

// autoCompactWriter is the writer identity of automatic compactions'
// commit records.
const autoCompactWriter = "quiver-auto-compact"

// WithAutoCompact turns on automatic compaction (off by default).
func WithAutoCompact(a AutoCompact) Option {
	return func(o *options) {
		if a.SmallBytes <= 0 {
			a.SmallBytes = DefaultAutoCompactSmallBytes
		}
		o.autoCompact = a
	}
}

// maybeCompact starts a background compaction of version v of ps when it
// holds more small files than the threshold and none is running. Only the
// log in memory is consulted: the check costs no storage call.
func (s *Store) maybeCompact(ps *profileState, v int) {
	a := s.opts.autoCompact
	if a.Files <= 0 {
		return
	}
	small := 0
	ps.mu.Lock()
	recs := ps.log.byVersion[v]
	if len(recs) > a.Files || ps.log.writes[v] != nil && len(ps.log.writes[v].Files) > a.Files {
		shared := map[string]bool{} // files appends share count once
		for _, r := range recs {
			for _, f := range r.Files {
				if f.Bytes < a.SmallBytes && (!f.Shared() || !shared[f.Path]) {
					small++
					shared[f.Path] = f.Shared()
				}
			}
		}
	}
	ps.mu.Unlock()
	if small <= a.Files || !ps.commit.compacting.CompareAndSwap(false, true) {
		return
	}
	s.bg.Add(1)
	go func() {
		defer s.bg.Done()
		defer ps.commit.compacting.Store(false)
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		rec, err := s.Compact(ctx, ps.p.keys, CompactOptions{TargetFileBytes: a.TargetFileBytes, Writer: autoCompactWriter})
		if err != nil {
			s.opts.log.Warn().Err(err).Str("profile", ps.p.String()).Str("version", VersionName(v)).Msg("automatic compaction failed; the next append retries it")
			return
		}
		s.opts.log.Info().Str("profile", ps.p.String()).Str("from", VersionName(v)).Str("to", rec.Version).
			Int("small_files", small).Int("files", len(rec.Files)).Dur("took", time.Since(start)).Msg("compacted automatically")
	}()
}
