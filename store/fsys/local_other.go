//go:build unix && !linux

package fsys

import "golang.org/x/sys/unix"

// openat2 is Linux-only; elsewhere Local resolves names one component at a
// time (see Local.walk).
func openat2(dirfd int, name string, flags int) (int, error) { return -1, unix.ENOSYS }

func haveOpenat2(rootFD int) bool { return false }

func trailingLink(rootFD int, name string) bool { return false }

// fdatasync is fsync where the system has no fdatasync.
func fdatasync(fd int) error { return ignoringEINTR(func() error { return unix.Fsync(fd) }) }

// linkFD: no O_TMPFILE here, so no marker inode is ever made.
func linkFD(fd, dirfd int, name string) error { return unix.EOPNOTSUPP }

// openTmpFile: no unnamed files here.
func openTmpFile(dirfd int) (int, error) { return -1, unix.EOPNOTSUPP }
