package fsys

import (
	"strconv"

	"golang.org/x/sys/unix"
)

// resolveFlags confine a lookup to the root: no component may be a
// symbolic link (the last one included), and nothing may resolve above the
// directory the lookup starts from.
const resolveFlags = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS

// openat2 opens name below dirfd with resolveFlags. It returns ENOSYS where
// the kernel lacks openat2 (before Linux 5.6).
func openat2(dirfd int, name string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: resolveFlags}
	return unix.Openat2(dirfd, name, &how)
}

// haveOpenat2 reports whether openat2 with resolveFlags works here: the
// kernel may predate it (ENOSYS), not know a flag (EINVAL), or a seccomp
// filter may refuse it (EPERM).
func haveOpenat2(rootFD int) bool {
	fd, err := ignoringEINTR2(func() (int, error) {
		return openat2(rootFD, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	})
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// fdatasync flushes a file's data and the metadata needed to read it back
// (its size), skipping timestamps.
func fdatasync(fd int) error { return ignoringEINTR(func() error { return unix.Fdatasync(fd) }) }

// trailingLink reports whether the last element of name (below rootFD) is
// a symbolic link, the others having been found to be directories.
func trailingLink(rootFD int, name string) bool {
	// O_PATH|O_NOFOLLOW opens a trailing link itself, even with
	// RESOLVE_NO_SYMLINKS.
	fd, err := openat2(rootFD, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	return unix.Fstat(fd, &st) == nil && isLink(&st)
}

// linkFD links the open file fd as name in dirfd: by the descriptor
// itself (AT_EMPTY_PATH, which needs CAP_DAC_READ_SEARCH), else through
// its /proc/self/fd entry.
func linkFD(fd, dirfd int, name string) error {
	err := unix.Linkat(fd, "", dirfd, name, unix.AT_EMPTY_PATH)
	if err != unix.ENOENT && err != unix.EPERM {
		return err
	}
	return unix.Linkat(unix.AT_FDCWD, "/proc/self/fd/"+strconv.Itoa(fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
}

// openTmpFile opens a new unnamed file in the directory dirfd.
func openTmpFile(dirfd int) (int, error) {
	return unix.Openat(dirfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, filePerm)
}
