package store

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Environment of an audit helper process (the standard re-exec pattern:
// the test binary runs itself with -test.run=^TestAuditHelperProcess$).
const (
	auditEnvMode   = "QUIVER_AUDIT_HELPER"
	auditEnvDir    = "QUIVER_AUDIT_DIR"
	auditEnvKeys   = "QUIVER_AUDIT_KEYS"
	auditEnvN      = "QUIVER_AUDIT_N"
	auditEnvWriter = "QUIVER_AUDIT_WRITER"
)

// TestAuditHelperProcess is not a test: it is the body of the helper
// processes the audit tests start. Modes:
//   - append: N appends of one row each to the profile, each with a run_id.
//   - hold: take the profile's manifest lock, start a new version and a
//     temp file in it, print "ready", and keep writing to the temp (as a
//     streaming writer does) until stdin closes or the process is killed.
func TestAuditHelperProcess(t *testing.T) {
	mode := os.Getenv(auditEnvMode)
	if mode == "" {
		t.Skip("helper process body; run by other tests")
	}
	if err := auditHelper(mode); err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

func auditHelper(mode string) error {
	ctx := context.Background()
	s, err := Open(os.Getenv(auditEnvDir), WithWriter(os.Getenv(auditEnvWriter)))
	if err != nil {
		return err
	}
	keys := strings.Split(os.Getenv(auditEnvKeys), "/")
	switch mode {
	case "append":
		n, err := strconv.Atoi(os.Getenv(auditEnvN))
		if err != nil {
			return err
		}
		w := os.Getenv(auditEnvWriter)
		for i := 0; i < n; i++ {
			md, _ := json.Marshal(map[string]string{"run_id": fmt.Sprintf("%s-%d", w, i)})
			rdr := ids(int64(i))
			_, err := s.Put(ctx, keys, rdr, PutOptions{Mode: ModeAppend, Metadata: md})
			rdr.Release()
			if err != nil {
				return err
			}
		}
		return nil
	case "hold":
		p, err := s.resolve(keys)
		if err != nil {
			return err
		}
		unlock, err := s.lockManifest(ctx, p)
		if err != nil {
			return err
		}
		defer unlock()
		v, err := s.reserveVersion(p)
		if err != nil {
			return err
		}
		vdir := p.join(VersionName(v))
		b, _ := json.Marshal(VersionInfo{Version: VersionName(v), Format: FormatParquet, Created: time.Now().UTC()})
		if err := s.fs.CreateExclusive(path.Join(vdir, versionInfoName), b); err != nil {
			return err
		}
		tmp, err := s.fs.CreateTemp(vdir, ".parquet")
		if err != nil {
			return err
		}
		defer tmp.Abort()
		fmt.Printf("ready %s %s\n", tmp.Name(), vdir)
		stop := make(chan struct{})
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			close(stop)
		}()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return nil
			case <-tick.C:
				if _, err := tmp.Write([]byte("batch")); err != nil {
					return err
				}
			}
		}
	}
	return fmt.Errorf("unknown mode %q", mode)
}

// auditProc is a running helper process.
type auditProc struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr strings.Builder
}

func startAuditHelper(t *testing.T, mode, dir string, keys []string, env ...string) *auditProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestAuditHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), auditEnvMode+"="+mode, auditEnvDir+"="+dir, auditEnvKeys+"="+strings.Join(keys, "/"))
	cmd.Env = append(cmd.Env, env...)
	h := &auditProc{cmd: cmd}
	var err error
	if h.stdin, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h.stdout = bufio.NewReader(out)
	cmd.Stderr = &h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return h
}

// wait waits for the helper to exit and fails the test unless it exited 0.
func (h *auditProc) wait(t *testing.T) {
	t.Helper()
	_ = h.stdin.Close()
	if err := h.cmd.Wait(); err != nil {
		t.Fatalf("helper %v: %v\n%s", h.cmd.Env[len(h.cmd.Env)-1], err, h.stderr.String())
	}
}

// kill kills the helper with SIGKILL, as a crash would.
func (h *auditProc) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = h.cmd.Wait()
}
