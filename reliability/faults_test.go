package reliability

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
)

// randomBatch is n rows whose val column does not compress.
func randomBatch(start, n int64) arrow.RecordBatch { return randomParts(start, n, 1) }

// randomParts is randomBatch with its client column spread over parts
// values (partitions, when a put partitions by it).
func randomParts(start, n int64, parts int) arrow.RecordBatch {
	r := rand.New(rand.NewPCG(uint64(start), 1))
	b := array.NewRecordBuilder(memory.DefaultAllocator, rowSchema)
	defer b.Release()
	for i := int64(0); i < n; i++ {
		b.Field(0).(*array.Int64Builder).Append(start + i)
		if parts == 1 {
			b.Field(1).(*array.StringBuilder).Append("fill")
		} else {
			b.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("p%02d", i%int64(parts)))
		}
		b.Field(2).(*array.Float64Builder).Append(r.Float64())
	}
	return b.NewRecordBatch()
}

// idsOf reads every version of a profile through the server: id → count.
func idsOf(t *testing.T, ctx context.Context, c *client.Client, path string) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	vl, err := listVersions(ctx, c, path)
	if err != nil {
		t.Fatalf("list-versions %s: %v", path, err)
	}
	for _, v := range vl.Versions {
		ids, err := readIDs(ctx, c, path, v.Version)
		if err != nil {
			t.Fatalf("read %s %s: %v", path, v.Version, err)
		}
		for _, id := range ids {
			out[id]++
		}
	}
	return out
}

// fill writes a file into dir until only leave bytes are free.
func fill(t *testing.T, dir string, leave int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	free := int64(st.Bavail) * st.Bsize
	name := filepath.Join(dir, "filler")
	f, err := os.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 64<<10)
	for n := free - leave; n > 0; {
		w := int64(len(chunk))
		if n < w {
			w = n
		}
		k, err := f.Write(chunk[:w])
		n -= int64(k)
		if err != nil {
			break // full already
		}
	}
	return name
}

// TestFaultDiskFull: the data dir is a small tmpfs; a filler leaves less
// and less space and puts (appends and writes of ~1.5 MB) run into ENOSPC
// mid-put. Each failed put must leave nothing visible, every acknowledged
// row stays readable once, no message shows a server path, and once space
// is freed the same put (same request_id) succeeds exactly once.
func TestFaultDiskFull(t *testing.T) {
	requireStress(t)
	mnt := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v: %s); TestStoreENOSPC covers ENOSPC through store.WithFS", err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("umount: %v %s", err, out)
		}
	})
	data := filepath.Join(mnt, "data")
	p := mustStart(t, data)
	c := mustDial(t, p.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const prof = "disk/full"
	b := rowsBatch(0, 100, "base")
	if _, err := put(ctx, c, prof, client.PutOptions{RequestID: "base"}, rowSchema, b); err != nil {
		t.Fatal(err)
	}
	b.Release()
	acked := map[int64]bool{}
	for i := int64(0); i < 100; i++ {
		acked[i] = true
	}
	var codesSeen counter
	var failedVisible int
	id := int64(1000)
	for _, leave := range []int64{0, 16 << 10, 256 << 10, 768 << 10, 1200 << 10} {
		// "partitioned" is a write partitioned by 16 values: its rows go
		// through the spill (a nameless file in the data dir) first.
		for _, mode := range []string{"append", "write", "partitioned"} {
			filler := fill(t, mnt, leave)
			req := "r-" + mode + "-" + time.Now().Format("150405.000000")
			rb := randomBatch(id, 100_000) // ~1.5 MB of Parquet
			opts := client.PutOptions{Mode: mode, RequestID: req}
			if mode == "partitioned" {
				rb.Release()
				rb = randomParts(id, 100_000, 16)
				opts.Mode, opts.PartitionBy = catalog.ModeWrite, []string{"client"}
			}
			_, err := put(ctx, c, prof, opts, rowSchema, rb)
			codesSeen.inc(mode + ":" + codeName(err))
			if err != nil && strings.Contains(err.Error(), mnt) {
				t.Errorf("message shows the server path: %v", err)
			}
			if err != nil {
				t.Logf("leave=%d %s: %s: %v", leave, mode, codeName(err), err)
			}
			if err == nil {
				for i := id; i < id+100_000; i++ {
					acked[i] = true
				}
			}
			ids := idsOf(t, ctx, c, prof)
			if err != nil && ids[id] > 0 {
				failedVisible++
				t.Errorf("BUG: put failed (%v) but its rows are visible", err)
			}
			for a := range acked {
				if ids[a] != 1 {
					t.Fatalf("acknowledged row %d visible %d times", a, ids[a])
				}
			}
			os.Remove(filler)
			if err != nil { // space is back: the retry succeeds once
				if _, err := put(ctx, c, prof, opts, rowSchema, rb); err != nil {
					t.Errorf("retry after freeing space: %v", err)
				} else {
					for i := id; i < id+100_000; i++ {
						acked[i] = true
					}
				}
				ids = idsOf(t, ctx, c, prof)
				if ids[id] != 1 {
					t.Errorf("after the retry the put's rows are visible %d times", ids[id])
				}
			}
			rb.Release()
			id += 1_000_000
		}
	}
	vr, err := verify(ctx, c, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = action(ctx, c, "sweep", map[string]any{"older_than_s": 0})
	vr2, err := verify(ctx, c, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	report(t, "tmpfs 64 MiB (filler leaves 0..1.2 MB free); puts of ~1.5 MB : outcomes %s; failed puts with visible rows=%d; verify before sweep %v, after sweep ok=%v %v",
		codesSeen.String(), failedVisible, vr.kinds(), vr2.OK, vr2.kinds())
	for _, pr := range vr.Problems {
		if pr.Kind != "stale_temp" && pr.Kind != "orphan" {
			t.Errorf("verify after ENOSPC: %s %s %s", pr.Kind, pr.Path, pr.Detail)
		}
	}
	if !vr2.OK {
		t.Errorf("verify after sweep: %+v", vr2)
	}
}

// TestFaultClientVanishes: a Go client cancels a DoPut mid-stream, a
// pyarrow client process is SIGKILLed mid-stream, a Go client abandons a
// DoGet after one batch. Nothing of the puts is visible, the server keeps
// serving, and verify is clean after a sweep.
func TestFaultClientVanishes(t *testing.T) {
	requireStress(t)
	p := mustStart(t, t.TempDir())
	c := mustDial(t, p.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const prof = "gone/x"
	base := rowsBatch(0, 100, "base")
	if _, err := put(ctx, c, prof, client.PutOptions{}, rowSchema, base); err != nil {
		t.Fatal(err)
	}
	base.Release()

	// 1. Go: cancel after 200 batches. Raw: a stream cut off midway.
	for round := 0; round < 5; round++ {
		pctx, pcancel := context.WithCancel(ctx)
		stream, err := c.Flight().DoPut(pctx)
		if err != nil {
			t.Fatal(err)
		}
		w := flight.NewRecordWriter(stream, ipc.WithSchema(rowSchema))
		w.SetFlightDescriptor(cmdDesc(map[string]any{"path": prof, "mode": []string{"append", "write"}[round%2]}))
		for i := int64(0); i < 200; i++ {
			rb := rowsBatch(int64(round+1)<<32+i*1000, 1000, "vanish")
			err := w.Write(rb)
			rb.Release()
			if err != nil {
				break
			}
		}
		pcancel()
		_ = w.Close()
	}
	// 2. pyarrow: SIGKILL mid-stream.
	var killed int
	if python != "" {
		addrFile := filepath.Join(t.TempDir(), "addrs")
		os.WriteFile(addrFile, []byte(p.addr+"\n"), 0o644)
		for round := 0; round < 3; round++ {
			cmd := exec.Command(python, filepath.Join(repo, "reliability", "pyclient.py"), "--vanish", "--addr-file", addrFile,
				"--name", "pyvanish", "--base", "1099511627776", "--seconds", "60", "--profiles", prof)
			out, _ := cmd.StdoutPipe()
			cmd.Stderr = os.Stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if !strings.HasPrefix(line, "streaming") {
				t.Fatalf("pyclient --vanish: %q", line)
			}
			time.Sleep(time.Duration(300+round*300) * time.Millisecond)
			_ = cmd.Process.Signal(syscall.SIGKILL)
			_ = cmd.Wait()
			killed++
		}
	}
	// 3. DoGet abandoned after one batch, 20 times.
	big := randomBatch(1<<50, 200_000)
	if _, err := put(ctx, c, "gone/big", client.PutOptions{}, rowSchema, big); err != nil {
		t.Fatal(err)
	}
	big.Release()
	for i := 0; i < 20; i++ {
		gctx, gcancel := context.WithCancel(ctx)
		if rdr, err := c.ReadTicket(gctx, []byte("gone/big")); err == nil {
			rdr.Next()
			gcancel()
			rdr.Release()
		}
		gcancel()
	}
	time.Sleep(500 * time.Millisecond) // let the server notice the cancellations
	ids := idsOf(t, ctx, c, prof)
	extra := 0
	for id, n := range ids {
		if id >= 100 {
			extra += n
		} else if n != 1 {
			t.Errorf("row %d visible %d times", id, n)
		}
	}
	if extra > 0 {
		t.Errorf("%d rows of abandoned puts are visible", extra)
	}
	vr, err := verify(ctx, c, map[string]any{})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = action(ctx, c, "sweep", map[string]any{"older_than_s": 0})
	vr2, _ := verify(ctx, c, map[string]any{})
	// The server still works.
	rb := rowsBatch(5000, 10, "after")
	if _, err := put(ctx, c, prof, client.PutOptions{}, rowSchema, rb); err != nil {
		t.Errorf("put after vanishing clients: %v", err)
	}
	rb.Release()
	if err := readLatestOnce(ctx, c, "gone/big"); err != nil {
		t.Errorf("read after abandoned reads: %v", err)
	}
	report(t, "Go puts cancelled mid-stream=5, pyarrow clients SIGKILLed mid-stream=%d, DoGets abandoned=20; rows of abandoned puts visible=%d; verify %v, after sweep ok=%v",
		killed, extra, vr.kinds(), vr2 != nil && vr2.OK)
	for _, pr := range vr.Problems {
		if pr.Kind != "stale_temp" {
			t.Errorf("verify: %s %s %s", pr.Kind, pr.Path, pr.Detail)
		}
	}
	if vr2 == nil || !vr2.OK {
		t.Errorf("verify after sweep: %+v", vr2)
	}
}

// TestFaultStaleLock: a manifest lock left by a killed process (its pid is
// gone) is taken over by the next writer at once (no wait, no operator);
// a lock whose owner is alive blocks writes and appends with Unavailable
// after --lock-timeout and is not broken by break-lock; once its owner is
// gone, break-lock breaks it.
func TestFaultStaleLock(t *testing.T) {
	requireStress(t)
	data := t.TempDir()
	p := mustStart(t, data, "--lock-timeout", "1s")
	c := mustDial(t, p.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const prof = "lock/x"
	b := rowsBatch(0, 10, "base")
	defer b.Release()
	if _, err := put(ctx, c, prof, client.PutOptions{Mode: catalog.ModeWrite}, rowSchema, b); err != nil {
		t.Fatal(err)
	}
	// A process that dies holding the lock: run one, SIGKILL it, and leave
	// a lock in its name, as `quiver` writes it.
	dead := exec.Command("sleep", "60")
	if err := dead.Start(); err != nil {
		t.Fatal(err)
	}
	_ = dead.Process.Signal(syscall.SIGKILL)
	_ = dead.Wait()
	host, _ := os.Hostname()
	lockPath := filepath.Join(data, "lock", "x", "manifest.json.write_lock")
	writeLock := func(pid int) {
		lb, _ := json.Marshal(map[string]any{"host": host, "pid": pid, "time": time.Now().UTC(), "writer": "killed"})
		if err := os.WriteFile(lockPath, lb, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeLock(dead.Process.Pid)
	t0 := time.Now()
	_, err := put(ctx, c, prof, client.PutOptions{Mode: catalog.ModeWrite}, rowSchema, b)
	waited := time.Since(t0)
	wcode := codeName(err)
	if err != nil || waited > 900*time.Millisecond {
		t.Errorf("write under a dead owner's lock: %v after %s, want OK at once", err, waited)
	}
	// A live owner's lock (this test process) holds: writes and appends
	// wait, then Unavailable; break-lock refuses.
	writeLock(os.Getpid())
	a := rowsBatch(100, 10, "append")
	defer a.Release()
	if _, err := put(ctx, c, prof, client.PutOptions{}, rowSchema, a); status.Code(err) != codes.Unavailable {
		t.Errorf("append under a live owner's lock: %v, want Unavailable", err)
	} else if strings.Contains(err.Error(), data) {
		t.Errorf("message shows the server path: %v", err)
	}
	res2, err := action(ctx, c, "break-lock", map[string]any{"path": prof})
	if err != nil || len(res2) != 1 || !strings.Contains(string(res2[0]), `"broken":false`) {
		t.Errorf("break-lock of a live owner's lock: %v %s", err, res2)
	}
	vr, _ := verify(ctx, c, map[string]any{"path": prof})
	// Its owner dies: break-lock breaks it.
	writeLock(dead.Process.Pid)
	res, err := action(ctx, c, "break-lock", map[string]any{"path": prof})
	if err != nil || len(res) != 1 || !strings.Contains(string(res[0]), `"broken":true`) {
		t.Errorf("break-lock of a dead owner's lock: %v %s", err, res)
	}
	if _, err := put(ctx, c, prof, client.PutOptions{}, rowSchema, a); err != nil {
		t.Errorf("append after break-lock: %v", err)
	}
	report(t, "write under a dead owner's lock: %s after %s (lock-timeout 1s); live owner: append Unavailable, break-lock %s; verify saw %v; dead owner: break-lock %s",
		wcode, waited.Round(10*time.Millisecond), res2, vr.kinds(), res)
}
