package fsys

import (
	"context"
	"io/fs"

	"golang.org/x/sys/unix"
)

// StageReplace implements ReplaceStager: data is written to a hidden temp
// file in name's directory and synced; Replace checks the token and
// renames the temp over name (its directory entry not synced, as
// ReplaceSync with SyncContent). A temp left by a crash in between is an
// ordinary stale temp (swept).
func (l *Local) StageReplace(ctx context.Context, name string, data []byte) (StagedReplace, error) {
	const op = "stage replace"
	if err := l.enter(ctx, name); err != nil {
		return nil, pathErr(op, name, err)
	}
	defer l.mu.RUnlock()
	dir, base := split(name)
	var tmp string
	err := l.inDir(ctx, dir, func(d *dirRef) error {
		t, fd, err := writeTemp(ctx, d.fd, base, data, filePerm, true)
		if err != nil {
			return err
		}
		if err := unix.Close(fd); err != nil {
			unlinkat(d.fd, t, 0)
			return err
		}
		tmp = t
		return nil
	})
	if err != nil {
		return nil, pathErr(op, name, err)
	}
	return &localStaged{l: l, name: name, dir: dir, base: base, tmp: tmp}, nil
}

// localStaged is a replacement staged by Local.StageReplace. It is not
// safe for concurrent use.
type localStaged struct {
	l               *Local
	name, dir, base string
	tmp             string
	done            bool // replaced or aborted: the temp is gone
}

func (s *localStaged) Replace(ctx context.Context, ifMatch Token) error {
	const op = "replace"
	if s.done {
		return pathErr(op, s.name, fs.ErrClosed)
	}
	if err := s.l.enter(ctx, s.name); err != nil {
		return pathErr(op, s.name, err)
	}
	defer s.l.mu.RUnlock()
	d, err := s.l.openDir(s.dir)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		// The directory (and the temp in it) went away.
		s.done = true
		return pathErr(op, s.name, ErrPrecondition)
	}
	if err != nil {
		return pathErr(op, s.name, err)
	}
	defer d.close()
	if ifMatch == "" {
		err = ignoringEINTR(func() error { return unix.Linkat(d.fd, s.tmp, d.fd, s.base, 0) })
		if err == unix.EEXIST {
			return pathErr(op, s.name, ErrPrecondition)
		}
		if err == nil {
			_ = unlinkat(d.fd, s.tmp, 0) // linked: the temp's name is the sweep's if it stays
			s.done = true
		}
	} else if err = matches(ctx, d.fd, s.base, ifMatch); err == nil {
		// renameat replaces the directory entry itself: were base swapped
		// for a symbolic link meanwhile, the link is replaced, not followed.
		err = ignoringEINTR(func() error { return unix.Renameat(d.fd, s.tmp, d.fd, s.base) })
		s.done = err == nil
	}
	if err != nil {
		return pathErr(op, s.name, err)
	}
	return nil
}

func (s *localStaged) Abort() error {
	if s.done {
		return nil
	}
	s.done = true
	if err := s.l.enter(context.Background(), s.name); err != nil {
		return pathErr("abort replace", s.name, err)
	}
	defer s.l.mu.RUnlock()
	d, err := s.l.openDir(s.dir)
	if err == unix.ENOENT || err == unix.ENOTDIR {
		return nil
	}
	if err != nil {
		return pathErr("abort replace", s.name, err)
	}
	defer d.close()
	if err := unlinkat(d.fd, s.tmp, 0); err != nil && err != unix.ENOENT {
		return pathErr("abort replace", s.name, err)
	}
	return nil
}
