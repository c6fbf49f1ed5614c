package fsys_test

import (
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// kernelCPU is the process's CPU time so far (user and system).
func kernelCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkFileSyscalls measures, per file, the system calls an append's
// data file costs on the file system of the temp dir, one at a time: the
// create (a new inode), the write of 20 KB, fdatasync, the link to its
// name and the temp name's unlink; and a create with O_TMPFILE. Each is
// reported as ns of wall time and of process CPU (user + system) per file
// (docs/benchmarks.md: on this VM's ext4 the create alone costs ~1 ms of
// CPU, which bounds one-file-per-append throughput).
func BenchmarkFileSyscalls(b *testing.B) {
	dir := b.TempDir()
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(dfd)
	data := make([]byte, 20<<10)
	steps := []string{"create", "write", "fdatasync", "link", "unlink", "tmpfile"}
	wall := make([]time.Duration, len(steps))
	cpu := make([]time.Duration, len(steps))
	step := func(i int, fn func() error) {
		t0, c0 := time.Now(), kernelCPU()
		if err := fn(); err != nil {
			b.Fatalf("%s: %v", steps[i], err)
		}
		wall[i] += time.Since(t0)
		cpu[i] += kernelCPU() - c0
	}
	for n := 0; b.Loop(); n++ {
		name := strconv.Itoa(n) + ".parquet"
		tmp := ".tmp-" + name
		var fd int
		step(0, func() (err error) {
			fd, err = unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_CLOEXEC, 0o444)
			return err
		})
		step(1, func() error { _, err := unix.Write(fd, data); return err })
		step(2, func() error { return unix.Fdatasync(fd) })
		step(3, func() error { return unix.Linkat(dfd, tmp, dfd, name, 0) })
		step(4, func() error { return unix.Unlinkat(dfd, tmp, 0) })
		unix.Close(fd)
		step(5, func() (err error) {
			fd, err = unix.Openat(dfd, ".", unix.O_TMPFILE|unix.O_WRONLY|unix.O_CLOEXEC, 0o444)
			if err == unix.EOPNOTSUPP || err == unix.EISDIR {
				return nil // the file system has no O_TMPFILE
			}
			if err == nil {
				unix.Close(fd)
			}
			return err
		})
	}
	for i, s := range steps {
		b.ReportMetric(float64(wall[i].Nanoseconds())/float64(b.N), s+"-ns/op")
		b.ReportMetric(float64(cpu[i].Nanoseconds())/float64(b.N), s+"-cpu-ns/op")
	}
}
