package store

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path"
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
	Start uint64 `json:"start,omitempty"`
	// PidNS is the process's pid namespace (the target of
	// /proc/self/ns/pid, "pid:[4026531836]"): two containers on one host
	// may share its name and boot id, and a pid means nothing in another
	// namespace (red team round 42's h05b: each server took the other's
	// lock as its owner's pid was not running in its own namespace).
	PidNS  string    `json:"pidns,omitempty"`
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
	// pidNS names this process's pid namespace ("" if unknown).
	pidNS() string
	// ownProc reports whether /proc describes this process's pid
	// namespace: a pid namespace without a /proc of its own (unshare
	// --pid without --mount-proc, a container given the host's /proc)
	// sees other processes under its pids there.
	ownProc() bool
}

type linuxProcs struct{}

func (linuxProcs) bootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (linuxProcs) ownProc() bool {
	self, err := os.Readlink("/proc/self")
	return err == nil && self == strconv.Itoa(os.Getpid())
}

func (linuxProcs) pidNS() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		return ""
	}
	return ns
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
	var st uint64
	if p.ownProc() {
		// (Where /proc is another namespace's, its entry under this pid
		// is another process: its start time would make this one look
		// gone to a server that reads the right /proc — red team round
		// 43's F1. Without a start, a live pid is judged alive.)
		st, _ = p.startTime(pid)
	}
	return Owner{Host: host, Boot: p.bootID(), PID: pid, Start: st, PidNS: p.pidNS(), Writer: writer}
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
	if o.PidNS != "" && s.id.PidNS != "" && o.PidNS != s.id.PidNS {
		// Another pid namespace (a container sharing the host's name
		// and kernel): its pid is not one of ours.
		return ownerUnknown
	}
	if !s.opts.procs.ownProc() {
		// This /proc is another namespace's: what it says of a pid is
		// about another process (red team round 43's F1).
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

// markClaims makes the claims this process creates on a local disk hold
// its identity (the claim markers' shared inode: fsys.Local's
// SetMarkerContent), so that sweep can tell the uncommitted file of a put
// whose process is gone (ClaimOwnerGone) without waiting for its age.
// Claims made elsewhere (S3), by pyrosome, or before this stay empty.
func (s *Store) markClaims() {
	l := localOf(s.fs)
	if l == nil {
		return
	}
	o := s.id
	o.Writer = ""
	o.Time = s.opts.now().UTC()
	if b, err := json.Marshal(o); err == nil {
		l.SetMarkerContent(b)
	}
}

// maxClaimBytes bounds what ClaimOwnerGone reads of a claim: an identity
// is about 150 bytes.
const maxClaimBytes = 4 << 10

// ClaimOwnerGone reports whether the data file name (relative to the data
// directory, as Inspection lists orphans) of version v of keys has a claim
// naming a process of this host, boot and pid namespace that is provably
// gone (judge): its put can never commit the file. False whenever that is
// not known — an empty claim (pyrosome's, a CSV append's, one from before
// claims held their maker, one on S3), an unreadable or foreign one, an
// owner on another host, in another pid namespace or alive.
func (s *Store) ClaimOwnerGone(ctx context.Context, keys []string, v int, name string) bool {
	p, err := s.resolve(keys)
	if err != nil {
		return false
	}
	i, f, ok := parseDataFile(path.Base(name))
	if !ok || f != FormatParquet {
		return false
	}
	claim := path.Join(p.vdir(v), claimName(i, f))
	st, err := s.fs.Stat(ctx, claim)
	if err != nil || st.Dir || st.Link || st.Special || st.Size == 0 || st.Size > maxClaimBytes {
		return false
	}
	b, _, err := s.fs.ReadFile(ctx, claim)
	if err != nil || len(b) > maxClaimBytes {
		return false
	}
	var o Owner
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&o); err != nil || dec.More() {
		return false
	}
	// Only a claim that says which pid namespace its pid belongs to,
	// ours: every claim that holds its maker does, where the namespace
	// can be read (a lock made before the namespace was recorded is
	// judged without it, as it was; a claim never).
	if o.PidNS == "" || o.PidNS != s.id.PidNS {
		return false
	}
	return s.judge(o) == ownerGone
}
