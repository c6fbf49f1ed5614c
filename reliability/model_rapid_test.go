package reliability

// A sequential state-machine test of the same model with rapid: one client,
// one server, no faults, so the contract is exact (a put to a fresh
// profile is accepted, a put that nests is refused, every read equals the
// model) and a failure shrinks to a minimal sequence of operations. Each
// rapid check works under its own key prefix of one server process.

import (
	"context"
	"flag"
	"fmt"
	"maps"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"pgregory.net/rapid"

	"github.com/quiverdb/quiver/client"
)

// seqKeys are the keys of the sequential test (under a per-check prefix):
// nesting families, layout names, a sane pair.
var seqKeys = []string{"a", "a/b", "a/b/c", "n", "n/v0", "v1", "e", "e/manifest.json", "e/x", "e/V2", "e/0.CSV", "e/.h", "data/one", "data/two"}

// seqModel is the state of one rapid check.
type seqModel struct {
	ctx    context.Context
	cl     *client.Client
	prefix string
	h      *history
	st     map[string]*mState
	rows   map[int64]int64
	reg    map[int64][]*string
	pid    int64
}

func (s *seqModel) path(rt *rapid.T) (string, keyKind) {
	k := rapid.SampledFrom(seqKeys).Draw(rt, "key")
	p := s.prefix + "/" + k
	return p, keyKindOf(p)
}

// refusedKey: a call with a reserved key must be refused with
// InvalidArgument, whatever exists around it.
func refusedKey(rt *rapid.T, p string, st outStatus, code, what string) {
	if st != stRejected || code != "InvalidArgument" {
		rt.Fatalf("%s: %q is reserved (%s): every call with it must be refused with InvalidArgument", what, p, reservedWhy(p))
	}
}

func (s *seqModel) state(p string) *mState {
	if st, ok := s.st[p]; ok {
		return st
	}
	return newState(-1, map[int]*mVer{})
}

// nested: a profile that exists inside or above p.
func (s *seqModel) nested(p string) string {
	for q, st := range s.st {
		if st.latest >= 0 && nestedPair(p, q) {
			return q
		}
	}
	return ""
}

// apply checks an outcome against the model and moves it.
func (s *seqModel) apply(rt *rapid.T, p string, in mInput, out mOutput, what string) {
	ok, next := step(s.state(p), in, out, s.rows, s.reg)
	if !ok {
		rt.Fatalf("%s: the model does not allow this outcome; model: %s", what, describeState(s.state(p)))
	}
	s.st[p] = next.(*mState)
	if f := s.h.f.all(); len(f) > 0 {
		rt.Fatalf("%s: %s: %s", what, f[0].Inv, f[0].Detail)
	}
}

func (s *seqModel) put(rt *rapid.T, mode string, bad string) {
	p, kind := s.path(rt)
	fam := rapid.IntRange(0, len(families)-1).Filter(func(f int) bool { return families[f].name != "wide" }).Draw(rt, "fam")
	var partBy []string
	if bad == "null-child" {
		fam = 2
	}
	if bad == "hive-default" {
		fam, mode, partBy = famPart, "write", []string{"region"}
	} else if mode == "write" && fam == famPart {
		partBy = rapid.SampledFrom([][]string{nil, {"region"}, {"day", "region"}}).Draw(rt, "partition_by")
	}
	s.pid++
	pid := s.pid
	rows := rapid.IntRange(1, 6).Draw(rt, "rows")
	d := buildPut(dataSpec{pid: pid, fam: fam, rows: rows, batches: 1 + rows%2, seed: uint64(pid), bad: bad, regions: regionValues[:3]})
	defer d.release()
	s.h.addPut(&putInfo{PID: pid, Path: p, Fam: fam, Mode: mode, Bad: bad, PartBy: partBy, Rows: d.rows, Regions: d.regions})
	s.rows[pid], s.reg[pid] = int64(len(d.rows)), d.regions
	opts := client.PutOptions{Mode: mode, RequestID: reqID(pid)}
	if partBy != nil {
		opts.PartitionBy = partBy
	}
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	meta, err := putStream(ctx, s.cl, p, opts, d.schema, d.batches, false)
	o := &mop{genOp: genOp{Kind: opAppend, Path: p, Fam: fam, PartBy: partBy, Rows: rows, Bad: bad, Mode: mode}, PID: pid, St: classify(err, true), Code: codeName(err), Ver: -1}
	if mode == "write" {
		o.Kind = opWrite
	}
	if err != nil {
		o.Err = err.Error()
	} else {
		s.h.putResult(o, meta)
	}
	what := fmt.Sprintf("put %s %q fam=%s rows=%d partition_by=%v bad=%q → %s %s v%d", mode, p, families[fam].name, rows, partBy, bad, o.St, trim(o.Err, 200), o.Ver)
	rt.Log(what)
	switch {
	case o.St == stUnknown:
		rt.Fatalf("%s: no faults are injected, yet the outcome is unknown", what)
	case kind == keyReserved:
		refusedKey(rt, p, o.St, o.Code, what)
		return
	case bad != "":
		if o.St != stRejected || o.Code != "InvalidArgument" {
			rt.Fatalf("%s: bad input (%s) must be refused with InvalidArgument", what, bad)
		}
		return
	case s.nested(p) != "":
		if o.St != stRejected || !isNestedRefusal(o.Err) {
			rt.Fatalf("%s: %q exists; a profile inside or above it must be refused as nested", what, s.nested(p))
		}
		return
	}
	s.apply(rt, p, mInput{Kind: o.Kind, PID: pid, Fam: fam, PartBy: partBy, EmptyRegion: slices.ContainsFunc(d.regions, func(r *string) bool { return r != nil && *r == "" })}, mOutput{St: o.St, Ver: o.Ver}, what)
}

func (s *seqModel) read(rt *rapid.T, version bool) {
	p, _ := s.path(rt)
	v := 0
	if version {
		v = rapid.IntRange(0, 4).Draw(rt, "version")
	}
	s.readAt(rt, p, version, v)
}

func (s *seqModel) readAt(rt *rapid.T, p string, version bool, v int) {
	kind := keyKindOf(p)
	o := &mop{genOp: genOp{Kind: opRead, Path: p, Read: "info"}, Ver: -1}
	if version {
		o.Kind, o.Read = opReadV, "json"
		o.ReadVer = v
	}
	rctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	full := true
	var rows []rowObs
	var err error
	if version {
		rows, _, err = readRows(rctx, s.cl, js(map[string]any{"path": p, "version": fmt.Sprintf("v%d", o.ReadVer)}), full)
	} else {
		rows, _, o.Ver, err = s.h.readInfo(rctx, s.cl, o)
	}
	o.St, o.Code = classify(err, false), codeName(err)
	if err != nil {
		o.Err = err.Error()
	}
	if o.St == stOK {
		o.IDs = s.h.checkRows(o, rows, full, nil, false)
		if o.IDs == nil {
			o.IDs = []int64{}
		}
		if version {
			o.Ver = o.ReadVer
		}
	}
	what := fmt.Sprintf("%s %q v%d → %s %s ids=%v", o.Kind, p, o.ReadVer, o.St, trim(o.Err, 200), o.IDs)
	rt.Log(what)
	if kind == keyReserved {
		refusedKey(rt, p, o.St, o.Code, what)
		return
	}
	if o.St == stRejected && s.nested(p) != "" {
		return // reading a directory of profiles
	}
	s.apply(rt, p, mInput{Kind: o.Kind, Ver: o.ReadVer}, mOutput{St: o.St, Ver: o.Ver, IDs: o.IDs, Rows: -1}, what)
}

func (s *seqModel) maint(rt *rapid.T, kind string) {
	p, _ := s.path(rt)
	keep := 0
	if kind == opRetain {
		keep = rapid.IntRange(1, 2).Draw(rt, "keep")
	}
	s.maintAt(rt, p, kind, keep)
}

func (s *seqModel) maintAt(rt *rapid.T, p, kind string, keep int) {
	kk := keyKindOf(p)
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	in := mInput{Kind: kind, From: -1, Keep: keep}
	out := mOutput{Ver: -1, Rows: -1}
	var err error
	switch kind {
	case opCompact:
		var res [][]byte
		res, err = action(ctx, s.cl, "compact", map[string]any{"path": p})
		if err == nil && len(res) == 1 {
			var x map[string]any
			_ = jsonUnmarshal(res[0], &x)
			o := &mop{Ver: -1}
			compactResult(o, x)
			out.Ver = o.Ver
			if o.ResRows > 0 {
				out.Rows = o.ResRows
			}
			if o.From != nil {
				in.From = *o.From
			} else {
				rt.Fatalf("compact %q: the result names no compacted_from: %s", p, res[0])
			}
		}
	case opRetain:
		var res [][]byte
		res, err = action(ctx, s.cl, "remove-old-versions", map[string]any{"path": p, "keep": in.Keep, "grace_s": 0})
		if err == nil && len(res) == 1 {
			var x struct {
				Removed []string `json:"removed"`
			}
			_ = jsonUnmarshal(res[0], &x)
			out.Removed = []int{}
			for _, v := range x.Removed {
				out.Removed = append(out.Removed, parseVer(v))
			}
		}
	case opLatest:
		var vl *versionList
		vl, err = listVersions(ctx, s.cl, p)
		if err == nil {
			out.Ver = parseVer(vl.Latest)
			for _, v := range vl.Versions {
				if v.Version == vl.Latest {
					out.Rows = v.Rows
				}
			}
		}
	}
	out.St = classify(err, false)
	what := fmt.Sprintf("%s %q keep=%d → %s %v v%d removed=%v rows=%d", kind, p, in.Keep, out.St, err, out.Ver, out.Removed, out.Rows)
	rt.Log(what)
	if kk == keyReserved {
		refusedKey(rt, p, out.St, codeName(err), what)
		return
	}
	if out.St == stRejected && s.nested(p) != "" {
		return
	}
	s.apply(rt, p, in, out, what)
}

// abandon starts a write, lets the server reserve its version and write
// its first files, looks at the profile meanwhile (list-versions, a read
// of the version being written), and abandons the stream: nothing
// changes, and whatever the look saw of the abandoned version must not
// outlive it (its number is given back).
func (s *seqModel) abandon(rt *rapid.T) {
	p, kind := s.path(rt)
	if kind == keyReserved {
		return
	}
	fam := rapid.IntRange(0, len(families)-1).Filter(func(f int) bool { return families[f].name != "wide" }).Draw(rt, "fam")
	s.pid++
	d := buildPut(dataSpec{pid: s.pid, fam: fam, rows: 4, batches: 2, seed: uint64(s.pid)})
	defer d.release()
	s.h.addPut(&putInfo{PID: s.pid, Path: p, Fam: fam, Mode: "write", Rows: d.rows, Regions: d.regions})
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	stream, err := s.cl.Flight().DoPut(sctx) // raw: a stream left unfinished
	if err != nil {
		rt.Fatalf("DoPut: %v", err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(d.schema))
	w.SetFlightDescriptor(cmdDesc(map[string]any{"path": p, "mode": "write", "request_id": reqID(s.pid)}))
	if err := w.Write(d.batches[0]); err != nil {
		// The server ended the stream before the batch went out: a put it
		// refused at once (a nested or layout name) has nothing to abandon.
		_ = stream.CloseSend()
		_, rerr := stream.Recv()
		if status.Code(rerr) == codes.InvalidArgument {
			rt.Logf("abandon %q: refused at once (%v)", p, rerr)
			return
		}
		rt.Fatalf("write the first batch: %v (then %v)", err, rerr)
	}
	time.Sleep(100 * time.Millisecond) // the version is reserved and its first file written
	next := 0
	if st := s.state(p); len(st.vers) > 0 {
		next = slices.Max(slices.Collect(maps.Keys(st.vers))) + 1
	}
	rt.Logf("abandon a write of %s to %q after one batch; meanwhile list-versions and a read of v%d", families[fam].name, p, next)
	s.maintAt(rt, p, opLatest, 0)
	s.readAt(rt, p, true, next)
	scancel()
	_, _ = stream.Recv()
	time.Sleep(100 * time.Millisecond) // the server removes what it wrote
}

// check: ListFlights under the prefix lists exactly the profiles that exist.
func (s *seqModel) check(rt *rapid.T) {
	ctx, cancel := context.WithTimeout(s.ctx, 30*time.Second)
	defer cancel()
	profiles, err := s.cl.List(ctx, s.prefix)
	if err != nil {
		rt.Fatalf("ListFlights: %v", err)
	}
	var got []string
	for _, pr := range profiles {
		got = append(got, pr.Path)
	}
	var want []string
	for p, st := range s.st {
		if st.latest >= 0 {
			want = append(want, p)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		rt.Fatalf("ListFlights %q lists %q; the model has %q", s.prefix, got, want)
	}
}

// TestModelSequential runs rapid state machines against one server, one
// subtest per concern so each known problem shrinks to its own minimal
// reproduction. QUIVER_MODEL_SEED sets rapid's seed; -rapid.checks the
// number of checks (default 20 at CI size, 200 at full).
func TestModelSequential(t *testing.T) {
	requireStress(t)
	if v := os.Getenv(modelSeedEnv); v != "" {
		_ = flag.Set("rapid.seed", v)
	}
	if f := flag.Lookup("rapid.nofailfile"); f != nil && f.Value.String() == f.DefValue {
		_ = flag.Set("rapid.nofailfile", "true") // the seed replays it; keep testdata clean
	}
	if f := flag.Lookup("rapid.checks"); f != nil && f.Value.String() == f.DefValue {
		n := "20"
		if sc.Name == "full" {
			n = "200"
		}
		_ = flag.Set("rapid.checks", n)
	}
	p := mustStart(t, t.TempDir())
	cl := mustDial(t, p.addr)
	iter := 0
	run := func(name string, actions func(s *seqModel) map[string]func(*rapid.T)) {
		t.Run(name, func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				iter++
				s := &seqModel{ctx: context.Background(), cl: cl, prefix: fmt.Sprintf("%s-%d", name, iter), h: newHistory(),
					st: map[string]*mState{}, rows: map[int64]int64{}, reg: map[int64][]*string{}}
				acts := actions(s)
				acts[""] = s.check
				rt.Repeat(acts)
			})
		})
	}
	puts := func(s *seqModel) map[string]func(*rapid.T) {
		return map[string]func(*rapid.T){
			"append": func(rt *rapid.T) { s.put(rt, "append", "") },
			"write":  func(rt *rapid.T) { s.put(rt, "write", "") },
			"read":   func(rt *rapid.T) { s.read(rt, false) },
			"readv":  func(rt *rapid.T) { s.read(rt, true) },
			"latest": func(rt *rapid.T) { s.maint(rt, opLatest) },
		}
	}
	// Puts and reads of valid data over nested and reserved keys.
	run("keys", puts)
	// Compaction and retention too.
	run("maintenance", func(s *seqModel) map[string]func(*rapid.T) {
		a := puts(s)
		a["compact"] = func(rt *rapid.T) { s.maint(rt, opCompact) }
		a["retain"] = func(rt *rapid.T) { s.maint(rt, opRetain) }
		return a
	})
	// Writes abandoned mid-stream while the version they reserved is
	// looked at, among puts, compaction and retention.
	run("abandon", func(s *seqModel) map[string]func(*rapid.T) {
		a := puts(s)
		a["abandon"] = s.abandon
		a["compact"] = func(rt *rapid.T) { s.maint(rt, opCompact) }
		a["retain"] = func(rt *rapid.T) { s.maint(rt, opRetain) }
		return a
	})
	// Bad data (crafted offsets are left to the concurrent test: they crash
	// the server).
	run("values", func(s *seqModel) map[string]func(*rapid.T) {
		a := puts(s)
		for _, b := range []string{"null-top", "null-child", "hive-default", "dup-columns"} {
			a["bad-"+b] = func(rt *rapid.T) { s.put(rt, rapid.SampledFrom([]string{"append", "write"}).Draw(rt, "mode"), b) }
		}
		return a
	})
}
