package quivertest

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Build compiles cmd/quiver into a new temporary directory (with the race
// detector when race is set) and returns the binary's path. The caller
// removes filepath.Dir(bin) when done.
func Build(race bool) (string, error) {
	dir, err := os.MkdirTemp("", "quiver-bin-")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "quiver")
	args := []string{"build", "-o", bin}
	if race {
		args = append(args, "-race")
	}
	out, err := exec.Command("go", append(args, "github.com/quiverdb/quiver/cmd/quiver")...).CombinedOutput()
	if err != nil {
		os.RemoveAll(dir)
		return "", fmt.Errorf("go build quiver: %w\n%s", err, out)
	}
	return bin, nil
}

// StartTimeout bounds how long Start waits for a server's address.
const StartTimeout = 60 * time.Second

// Proc is one running `quiver serve`.
type Proc struct {
	// Addr is the address it serves Flight on (from its "quiver: serving
	// DIR on ADDR" line).
	Addr string
	// MetricsAddr is the host:port of its /metrics, when it serves them.
	MetricsAddr string
	// Storage is what it serves.
	Storage Storage
	// Cmd is the process.
	Cmd *exec.Cmd

	logs   *LogBuffer
	done   chan struct{}
	err    error
	killed atomic.Bool
}

// Start runs `bin serve` on 127.0.0.1:0 over st with --log-level warn and
// args (later flags win), and waits for its address.
func Start(bin string, st Storage, args ...string) (*Proc, error) {
	all := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", st.DataDir, "--log-level", "warn"}, st.Flags...)
	p := &Proc{Storage: st, logs: &LogBuffer{}, done: make(chan struct{})}
	p.Cmd = exec.Command(bin, append(all, args...)...)
	if len(st.Env) > 0 {
		p.Cmd.Env = append(os.Environ(), st.Env...)
	}
	stdout, err := p.Cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	p.Cmd.Stderr = p.logs
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	type addrs struct{ flight, metrics string }
	addrc := make(chan addrs, 1)
	go func() {
		var metrics string
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if m, ok := strings.CutPrefix(line, "quiver: metrics on http://"); ok {
				metrics = strings.TrimSuffix(m, "/metrics")
			}
			if strings.HasPrefix(line, "quiver: serving ") {
				f := strings.Fields(line)
				select {
				case addrc <- addrs{f[len(f)-1], metrics}:
				default:
				}
			}
		}
	}()
	go func() { p.err = p.Cmd.Wait(); close(p.done) }()
	select {
	case a := <-addrc:
		p.Addr, p.MetricsAddr = a.flight, a.metrics
		return p, nil
	case <-p.done:
		return nil, fmt.Errorf("quiver serve exited (%v): %s", p.err, p.logs.String())
	case <-time.After(StartTimeout):
		p.Kill()
		return nil, fmt.Errorf("quiver serve did not print its address within %s: %s", StartTimeout, p.logs.String())
	}
}

// MustStart is Start that fails tb, and stops the server when tb's test
// ends (it must exit 0, unless the test killed or stopped it).
func MustStart(tb testing.TB, bin string, st Storage, args ...string) *Proc {
	tb.Helper()
	p, err := Start(bin, st, args...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if err := p.Stop(StopTimeout); err != nil {
			tb.Errorf("%v; log tail:\n%s", err, Tail(p.Logs(), 3000))
		}
	})
	return p
}

// StopTimeout is how long Stop waits after SIGTERM before it kills.
const StopTimeout = 60 * time.Second

// Stop sends SIGTERM and waits for the exit, killing the process after
// timeout. It returns an error unless the process exited 0 (now or
// before) or was killed by Kill.
func (p *Proc) Stop(timeout time.Duration) error {
	select {
	case <-p.done:
		if p.err != nil && !p.killed.Load() {
			return fmt.Errorf("quiver serve exited with %w", p.err)
		}
		return nil
	default:
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(timeout):
		p.Kill()
		return fmt.Errorf("quiver serve did not stop within %s of SIGTERM", timeout)
	}
	if p.err != nil {
		return fmt.Errorf("quiver serve exited with %w", p.err)
	}
	return nil
}

// Kill SIGKILLs the process and waits for it.
func (p *Proc) Kill() {
	p.killed.Store(true)
	_ = p.Cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

// Signal sends sig to the process.
func (p *Proc) Signal(sig os.Signal) error { return p.Cmd.Process.Signal(sig) }

// Done is closed when the process has exited; Err is then its exit.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is how the process exited (after Done).
func (p *Proc) Err() error {
	select {
	case <-p.done:
		return p.err
	default:
		return errors.New("still running")
	}
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.Cmd.Process.Pid }

// Logs is what the process wrote to stderr so far (its log; the first 4
// MiB).
func (p *Proc) Logs() string { return p.logs.String() }

// Tail is the last n bytes of s.
func Tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// LogBuffer keeps the first 4 MiB written to it; safe for concurrent use.
type LogBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write implements io.Writer.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() < 4<<20 {
		l.b.Write(p)
	}
	return len(p), nil
}

// String is what was kept.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
