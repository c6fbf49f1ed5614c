package store_test

// Helper processes for the multi-process, crash, lineage and memory tests:
// the test binary re-executes itself (TestHelperProcess, selected by
// QUIVER_HELPER), and each helper opens the same data directory with
// store.Open, as separate servers would.
//
// Also here: an independent reader of a profile's commit log (the test's
// own parser of .log/*.ndjson and .log/HEAD), so that the tests check the
// store's claims against the bytes on disk, not against the store's own
// reading of them.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/quiverdb/quiver/store"
)

// Environment of a helper process.
const (
	helperEnvMode = "QUIVER_HELPER"      // append | write | crash | lockhold | bench
	helperEnvDir  = "QUIVER_HELPER_DIR"  // data directory
	helperEnvArgs = "QUIVER_HELPER_ARGS" // JSON helperArgs
)

// helperArgs is what the parent tells a helper.
type helperArgs struct {
	Keys      []string `json:"keys"`
	Writer    int64    `json:"writer"`     // writer id stamped into every row
	N         int      `json:"n"`          // operations to do (0: until killed)
	Rows      int      `json:"rows"`       // rows per batch
	Seed      int64    `json:"seed"`       // crash helper: PRNG seed
	LockMS    int      `json:"lock_ms"`    // lock timeout
	SizeBytes int64    `json:"size_bytes"` // bench helper: raw bytes to write
	WaitGo    bool     `json:"wait_go"`    // wait for a line on stdin before starting
}

// helperAck is one line a helper prints on stdout. A put is announced
// (Start set, Line empty) before it begins and acknowledged (Line: the
// commit record exactly as it is stored in the log) after Put returned.
type helperAck struct {
	Writer int64     `json:"writer"`
	Seq    int64     `json:"seq"`
	Rows   int       `json:"rows"`
	Mode   string    `json:"mode,omitempty"`
	Part   bool      `json:"part,omitempty"` // partitioned write
	Line   string    `json:"line,omitempty"`
	Start  time.Time `json:"start"`
	End    time.Time `json:"end"`
	Err    string    `json:"err,omitempty"`
	Ready  bool      `json:"ready,omitempty"`
	Begin  bool      `json:"begin,omitempty"` // announcement of a put
}

// commit parses the acknowledged record.
func (a helperAck) commit(t testing.TB) *store.CommitRecord {
	t.Helper()
	c, err := store.ParseCommitRecord([]byte(a.Line))
	if err != nil {
		t.Fatalf("writer %d seq %d: acknowledged record does not parse: %v (%q)", a.Writer, a.Seq, err, a.Line)
	}
	return c
}

// TestHelperProcess is not a test: it is the body of a helper process.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnvMode)
	if mode == "" {
		t.Skip("helper process entry point; run by the multi-process, crash, lineage and memory tests")
	}
	var a helperArgs
	if err := json.Unmarshal([]byte(os.Getenv(helperEnvArgs)), &a); err != nil {
		fmt.Fprintln(os.Stderr, "helper: bad args:", err)
		os.Exit(2)
	}
	dir := os.Getenv(helperEnvDir)
	var err error
	switch mode {
	case "append", "write":
		err = helperPutLoop(dir, mode, a)
	case "crash":
		err = helperCrashLoop(dir, a)
	case "lockhold":
		err = helperLockHold(dir, a)
	case "bench":
		err = helperBench(dir, a)
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// helperStdout serialises output lines (one write(2) per line).
var helperStdout sync.Mutex

func helperPrint(v any) {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	helperStdout.Lock()
	defer helperStdout.Unlock()
	_, _ = os.Stdout.Write(append(b, '\n'))
}

// helperWaitGo blocks until the parent writes a line to stdin, so that
// every helper starts at the same moment.
func helperWaitGo() {
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
}

// helperPutLoop does N appends or writes of Rows rows each, acknowledging
// each with its record line and its start and end times.
func helperPutLoop(dir, mode string, a helperArgs) error {
	s, err := store.Open(dir, store.WithLockTimeout(time.Duration(a.LockMS)*time.Millisecond),
		store.WithWriter(fmt.Sprintf("helper-%s-%d", mode, a.Writer)))
	if err != nil {
		return err
	}
	defer s.Close()
	helperPrint(helperAck{Writer: a.Writer, Ready: true})
	if a.WaitGo {
		helperWaitGo()
	}
	for seq := int64(0); seq < int64(a.N); seq++ {
		rdr := mpBatch(a.Writer, seq, a.Rows)
		o := store.PutOptions{Mode: store.ModeAppend, Metadata: json.RawMessage(fmt.Sprintf(`{"run_id":"w%d-s%d"}`, a.Writer, seq))}
		if mode == "write" {
			o.Mode = store.ModeWrite
		}
		start := time.Now()
		c, err := s.Put(context.Background(), a.Keys, rdr, o)
		end := time.Now()
		rdr.Release()
		if err != nil {
			helperPrint(helperAck{Writer: a.Writer, Seq: seq, Err: fmt.Sprintf("%v (after %s)", err, end.Sub(start).Round(time.Millisecond)), Start: start, End: end})
			continue
		}
		helperPrint(helperAck{Writer: a.Writer, Seq: seq, Rows: a.Rows, Mode: string(o.Mode), Line: string(c.Line()), Start: start, End: end})
	}
	return nil
}

// helperLockHold takes the profile's manifest lock the way a committer
// does (store.WithLock: the lock names this process by host, boot id, pid
// and start time) and holds it until it is killed.
func helperLockHold(dir string, a helperArgs) error {
	s, err := store.Open(dir, store.WithWriter("lockhold"))
	if err != nil {
		return err
	}
	return s.WithLock(context.Background(), a.Keys, func() error {
		helperPrint(helperAck{Writer: a.Writer, Ready: true})
		time.Sleep(time.Hour)
		return nil
	})
}

// helperProc is a running helper process.
type helperProc struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	acks  chan helperAck // closed when stdout ends
	ready chan struct{}
	errb  *strings.Builder
	errMu sync.Mutex
	done  chan error // the result of Wait, once
}

// helperCommand is the test binary re-executed as a helper process.
func helperCommand(mode, dir, args string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=30m")
	cmd.Env = append(os.Environ(), helperEnvMode+"="+mode, helperEnvDir+"="+dir, helperEnvArgs+"="+args)
	return cmd
}

// startHelper starts the test binary as a helper process. Lines it prints
// arrive on acks; a last line cut short by a kill is dropped.
func startHelper(t testing.TB, mode, dir string, a helperArgs) *helperProc {
	t.Helper()
	args, _ := json.Marshal(a)
	cmd := helperCommand(mode, dir, string(args))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &helperProc{cmd: cmd, stdin: stdin, acks: make(chan helperAck, 4096), ready: make(chan struct{}), errb: &strings.Builder{}, done: make(chan error, 1)}
	cmd.Stderr = &lockedWriter{mu: &h.errMu, w: h.errb}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
	})
	go func() {
		br := bufio.NewReaderSize(stdout, 1<<20)
		readyOnce := false
		for {
			line, err := br.ReadBytes('\n')
			if err != nil {
				break // a line without its newline was cut short by a kill
			}
			line = bytes.TrimSpace(line)
			if len(line) == 0 || line[0] != '{' {
				continue // "PASS" and the like, should the helper ever return
			}
			var ack helperAck
			if err := json.Unmarshal(line, &ack); err != nil {
				ack = helperAck{Err: "parent: unparsable helper line: " + string(line)}
			}
			if ack.Ready {
				if !readyOnce {
					readyOnce = true
					close(h.ready)
				}
				continue
			}
			h.acks <- ack
		}
		close(h.acks)
		h.done <- cmd.Wait()
	}()
	return h
}

// waitReady waits for the helper's ready line.
func (h *helperProc) waitReady(t testing.TB, what string) {
	t.Helper()
	select {
	case <-h.ready:
	case err := <-h.done:
		t.Fatalf("%s: helper exited before it was ready: %v\n%s", what, err, h.stderr())
	case <-time.After(60 * time.Second):
		t.Fatalf("%s: helper did not start: %s", what, h.stderr())
	}
}

func (h *helperProc) stderr() string {
	h.errMu.Lock()
	defer h.errMu.Unlock()
	return h.errb.String()
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// stressScale reports whether QUIVER_STRESS=1 asks for the long settings.
func stressScale() bool { return os.Getenv("QUIVER_STRESS") != "" && os.Getenv("QUIVER_STRESS") != "0" }

// smallScale reports whether -short or QUIVER_STRESS=0 asks for the quick
// settings (used for the race-detector run).
func smallScale() bool { return testing.Short() || os.Getenv("QUIVER_STRESS") == "0" }

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// logEntry is one line of a commit log as the test reads it from disk.
type logEntry struct {
	rec  *store.CommitRecord
	line []byte
	seg  string
}

// diskLog is a profile's commit log read from disk by the test.
type diskLog struct {
	entries []logEntry
	// head is .log/HEAD (seq 0 when absent).
	head struct {
		Seq  int64  `json:"seq"`
		Hash string `json:"hash"`
	}
	// problems are breaks of the format or of the chain.
	problems []string
	temps    []string
}

var segNameRe = regexp.MustCompile(`^(\d{20})\.ndjson$`)

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// readDiskLog parses pdir/.log: every segment, in order of its name; each
// line must parse as a record whose seq follows the one before it and
// whose prev is the SHA-256 of the line before it.
func readDiskLog(t testing.TB, pdir string) *diskLog {
	t.Helper()
	dl := &diskLog{}
	ents, err := os.ReadDir(filepath.Join(pdir, ".log"))
	if err != nil {
		if os.IsNotExist(err) {
			return dl
		}
		t.Fatal(err)
	}
	var segs []string
	for _, e := range ents {
		switch {
		case segNameRe.MatchString(e.Name()):
			segs = append(segs, e.Name())
		case e.Name() == "HEAD":
			b, err := os.ReadFile(filepath.Join(pdir, ".log", "HEAD"))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &dl.head); err != nil {
				dl.problems = append(dl.problems, fmt.Sprintf("HEAD %q: %v", b, err))
			}
		case strings.HasPrefix(e.Name(), ".") && strings.HasSuffix(e.Name(), ".tmp"):
			dl.temps = append(dl.temps, e.Name())
		default:
			dl.problems = append(dl.problems, "foreign file in .log: "+e.Name())
		}
	}
	sort.Strings(segs)
	prevHash := ""
	var seq int64
	for _, name := range segs {
		first, _ := strconv.ParseInt(segNameRe.FindStringSubmatch(name)[1], 10, 64)
		b, err := os.ReadFile(filepath.Join(pdir, ".log", name))
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 || b[len(b)-1] != '\n' {
			dl.problems = append(dl.problems, name+": does not end with a newline")
			continue
		}
		if first != seq+1 {
			dl.problems = append(dl.problems, fmt.Sprintf("%s follows record %d", name, seq))
		}
		for i, line := range bytes.Split(b[:len(b)-1], []byte("\n")) {
			rec, err := store.ParseCommitRecord(line)
			if err != nil {
				dl.problems = append(dl.problems, fmt.Sprintf("%s line %d: %v", name, i+1, err))
				continue
			}
			if rec.Seq != first+int64(i) || rec.Seq != seq+1 {
				dl.problems = append(dl.problems, fmt.Sprintf("%s line %d holds record %d after record %d", name, i+1, rec.Seq, seq))
			}
			if rec.Prev != prevHash {
				dl.problems = append(dl.problems, fmt.Sprintf("record %d does not chain (prev %.12s, want %.12s)", rec.Seq, rec.Prev, prevHash))
			}
			if string(rec.Line()) != string(line) {
				dl.problems = append(dl.problems, fmt.Sprintf("record %d: Line() differs from the bytes stored", rec.Seq))
			}
			dl.entries = append(dl.entries, logEntry{rec: rec, line: append([]byte(nil), line...), seg: name})
			seq, prevHash = rec.Seq, sha256Hex(line)
		}
	}
	if dl.head.Seq > seq {
		dl.problems = append(dl.problems, fmt.Sprintf("HEAD names record %d, the log ends at %d", dl.head.Seq, seq))
	}
	for _, e := range dl.entries {
		if e.rec.Seq == dl.head.Seq && sha256Hex(e.line) != dl.head.Hash {
			dl.problems = append(dl.problems, fmt.Sprintf("HEAD's hash is not record %d's", e.rec.Seq))
		}
	}
	return dl
}

// bySeq returns the entry of record seq, or nil.
func (dl *diskLog) bySeq(seq int64) *logEntry {
	i := sort.Search(len(dl.entries), func(i int) bool { return dl.entries[i].rec.Seq >= seq })
	if i < len(dl.entries) && dl.entries[i].rec.Seq == seq {
		return &dl.entries[i]
	}
	return nil
}

// maxWrite is the highest version a write record names (-1: none).
func (dl *diskLog) maxWrite() int {
	m := -1
	for _, e := range dl.entries {
		if e.rec.Mode == store.ModeWrite {
			v, _ := store.ParseVersion(e.rec.Version)
			m = max(m, v)
		}
	}
	return m
}

// readManifest reads a profile's manifest.json by hand.
func readManifest(pdir string) (int, error) {
	b, err := os.ReadFile(filepath.Join(pdir, "manifest.json"))
	if err != nil {
		return 0, err
	}
	var m struct {
		Latest string `json:"latest_data_dir"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return 0, fmt.Errorf("manifest %q: %w", b, err)
	}
	return store.ParseVersion(m.Latest)
}

// versionDirs lists the vN directories of a profile, ascending.
func versionDirs(t testing.TB, pdir string) []int {
	t.Helper()
	ents, err := os.ReadDir(pdir)
	if err != nil {
		t.Fatal(err)
	}
	var vs []int
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "v") {
			if n, err := store.ParseVersion(e.Name()); err == nil {
				vs = append(vs, n)
			}
		}
	}
	sort.Ints(vs)
	return vs
}

// fileSHA256 hashes a file.
func fileSHA256(t testing.TB, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Errorf("hash: %v", err)
		return ""
	}
	return sha256Hex(b)
}
