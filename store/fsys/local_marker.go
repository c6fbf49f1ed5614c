//go:build unix

package fsys

import (
	"context"
	"slices"
	"sync"

	"golang.org/x/sys/unix"
)

// markerInode is the inode Local links under the names of markers:
// an unnamed temporary file (O_TMPFILE) in the root, or nothing where the
// system cannot make or link one (then markers are created as files).
type markerInode struct {
	mu       sync.Mutex
	fd       int // -1: none yet
	disabled bool
	links    int    // links made from fd
	content  []byte // what each marker holds (SetMarkerContent)
}

// SetMarkerContent makes every marker created from now on hold b (synced
// with it) rather than nothing: the store writes its process's identity
// there, so that a claim says which process made it. Markers are still
// never written after they are made.
func (l *Local) SetMarkerContent(b []byte) {
	m := &l.marker
	m.mu.Lock()
	defer m.mu.Unlock()
	m.content = slices.Clone(b)
	if m.fd >= 0 {
		// A marker inode made with the old content: the next link makes
		// a fresh one.
		m.links = maxMarkerLinks
	}
}

// maxMarkerLinks is how many names one marker inode gets before a fresh
// one is made (ext4 allows 65,000 links to an inode).
const maxMarkerLinks = 60_000

// CreateMarker creates the marker name exclusively (see Marker): a hard
// link to the shared inode (empty, or holding SetMarkerContent's bytes),
// or, where links fail, a file of its own with the same content.
func (l *Local) CreateMarker(ctx context.Context, name string) error {
	const op = "create exclusive"
	if err := l.enter(ctx, name); err != nil {
		return pathErr(op, name, err)
	}
	defer l.mu.RUnlock()
	dir, base := split(name)
	err := l.inDir(ctx, dir, func(d *dirRef) error {
		err := l.linkMarker(d.fd, base)
		if err == errNoMarker {
			err = createIn(ctx, d.fd, base, l.markerContent(), SyncContent)
		}
		return err
	})
	if err != nil {
		return pathErr(op, name, err)
	}
	return nil
}

// linkMarker links the marker inode as base in dirfd: EEXIST (as existErr)
// when base exists, errNoMarker when this system cannot link markers.
func (l *Local) linkMarker(dirfd int, base string) error {
	m := &l.marker
	m.mu.Lock()
	defer m.mu.Unlock()
	for try := 0; ; try++ {
		if m.disabled {
			return errNoMarker
		}
		if m.fd < 0 || m.links >= maxMarkerLinks {
			if err := m.renew(l.rootFD); err != nil {
				m.disabled = true
				return errNoMarker
			}
		}
		err := ignoringEINTR(func() error { return linkFD(m.fd, dirfd, base) })
		switch {
		case err == nil:
			m.links++
			return nil
		case err == unix.EEXIST:
			return existErr(dirfd, base)
		case err == unix.ENOENT && unlinkedDir(dirfd):
			return err // the directory went, not the way to link (see inDir)
		case err == unix.EMLINK && try == 0:
			m.links = maxMarkerLinks // a fresh inode, once
		case err == unix.ENOENT || err == unix.EPERM || err == unix.EXDEV || err == unix.EOPNOTSUPP || err == unix.EINVAL:
			// No way to link an open file here (no /proc, no
			// CAP_DAC_READ_SEARCH): files it is.
			m.disabled = true
			return errNoMarker
		default:
			return err
		}
	}
}

// markerContent is what markers hold (SetMarkerContent).
func (l *Local) markerContent() []byte {
	l.marker.mu.Lock()
	defer l.marker.mu.Unlock()
	return l.marker.content
}

// renew replaces the marker inode with a fresh unnamed file in the root,
// holding the markers' content, synced before any name links to it.
func (m *markerInode) renew(rootFD int) error {
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
	fd, err := ignoringEINTR2(func() (int, error) { return openTmpFile(rootFD) })
	if err != nil {
		return err
	}
	if len(m.content) > 0 {
		err := writeFull(fd, m.content)
		if err == nil {
			err = ignoringEINTR(func() error { return unix.Fdatasync(fd) })
		}
		if err != nil {
			unix.Close(fd)
			return err
		}
	}
	m.fd, m.links = fd, 0
	return nil
}

func (m *markerInode) close() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.fd >= 0 {
		unix.Close(m.fd)
		m.fd = -1
	}
}
