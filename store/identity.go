package store

import (
	"bytes"
	"errors"
	"math"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Owner names the process holding a lock: enough to tell, from the same
// machine, whether that process is still alive — even after a restart
// reused its pid (a container's server is pid 1 every time).
// pyrosome writes an empty lock file, which parses as the zero Owner.
type Owner struct {
	Host string `json:"host"`
	// Boot is the kernel's boot id (/proc/sys/kernel/random/boot_id):
	// a pid means nothing across reboots.
	Boot string `json:"boot,omitempty"`
	PID  int    `json:"pid"`
	// Start is the process start time in clock ticks after boot
	// (/proc/PID/stat field 22): a restarted process that got the same pid
	// has another start time.
	Start  uint64    `json:"start,omitempty"`
	Time   time.Time `json:"time"`
	Writer string    `json:"writer,omitempty"`
}

// LockInfo is the content of manifest.json.write_lock.
type LockInfo = Owner

// procs answers questions about processes on this machine; tests replace
// it.
type procs interface {
	// startTime is the start time of pid, ok false if no such live process
	// (a zombie counts as dead: it will never finish a put).
	startTime(pid int) (start uint64, ok bool)
	bootID() string
	// bootTime is when this machine booted (the zero time if unknown).
	bootTime() time.Time
}

type linuxProcs struct{}

func (linuxProcs) bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (linuxProcs) bootTime() time.Time {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}
	}
	for line := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(line, "btime "); ok {
			if sec, err := strconv.ParseInt(strings.TrimSpace(rest), 10, 64); err == nil && sec > 0 {
				return time.Unix(sec, 0)
			}
		}
	}
	return time.Time{}
}

func (linuxProcs) startTime(pid int) (uint64, bool) {
	if pid <= 0 || pid > math.MaxInt32 {
		// No such process can exist; kill(2) would see the pid cut to
		// 32 bits (2^32 is 0: this process's group, alive; red team
		// round 15's h04).
		return 0, false
	}
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, true // no procfs: trust kill(2); start unknown
	}
	// The command name is in parentheses and may hold spaces or ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, true
	}
	f := strings.Fields(string(b[i+2:]))
	// f[0] is field 3 (state); start time is field 22, f[19].
	if len(f) > 0 && f[0] == "Z" {
		return 0, false
	}
	if len(f) < 20 {
		return 0, true
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, true
	}
	return st, true
}

// self is this process's identity.
func (s *Store) self() Owner {
	o := s.id
	o.Time = s.opts.now().UTC()
	return o
}

func newIdentity(host string, pid int, p procs, writer string) Owner {
	st, _ := p.startTime(pid)
	return Owner{Host: host, Boot: p.bootID(), PID: pid, Start: st, Writer: writer}
}

// ownerState says what is known of a lock owner from here.
type ownerState int

const (
	ownerUnknown ownerState = iota // another machine, or no identity: judge by age
	ownerAlive
	ownerGone
)

// judge decides whether o is alive, from this machine's point of view.
// Only an owner on this host and this boot can be proven gone: its pid is
// not running, or now belongs to a process started at another time.
func (s *Store) judge(o Owner) ownerState {
	if o.Host == "" || o.PID <= 0 || o.Host != s.id.Host {
		return ownerUnknown
	}
	if o.Boot != "" && s.id.Boot != "" && o.Boot != s.id.Boot {
		// Same host name, another boot: a rebooted machine, or another
		// machine with the same name. The pid says nothing either way.
		return ownerUnknown
	}
	st, alive := s.opts.procs.startTime(o.PID)
	switch {
	case !alive:
		return ownerGone
	case o.Start != 0 && st != 0 && st != o.Start:
		return ownerGone // the pid was reused
	}
	return ownerAlive
}
