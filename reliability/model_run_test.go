package reliability

// The runner of the model-based test: clients that execute generated
// operations against `quiver serve` processes and record each one (start,
// end, input, outcome) in the history; a killer that SIGKILLs servers
// mid-operation; and the quiescent check after each phase.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/client"
)

// reqID is the request_id of put pid (every attempt of a put sends it).
func reqID(pid int64) string { return "m-" + strconv.FormatInt(pid, 10) }

// modelRun is one run of the model-based test.
type modelRun struct {
	t    *testing.T
	seed uint64
	cfg  genConfig
	c    *cluster
	h    *history
	t0   time.Time

	pid      atomic.Int64
	opsDone  atomic.Int64
	kills    atomic.Int64
	killsMid atomic.Int64 // kills with an operation in flight on the victim
	sinceSwp atomic.Bool  // a server was killed since the last sweep
	sinceBrk atomic.Bool  // … since the last break-lock
	breaks   atomic.Int64
	knownMu  sync.Mutex
	known    map[string][]int // versions seen per profile (for readv)
	down     map[int]bool     // servers being restarted (under c.mu)
	killMu   sync.Mutex       // one kill or crash restart at a time
	outDir   string
}

func (m *modelRun) now() int64 { return int64(time.Since(m.t0)) }

func (m *modelRun) noteVersion(path string, v int) {
	if v < 0 {
		return
	}
	m.knownMu.Lock()
	defer m.knownMu.Unlock()
	if !slices.Contains(m.known[path], v) {
		m.known[path] = append(m.known[path], v)
	}
}

func (m *modelRun) knownVersions(path string) []int {
	m.knownMu.Lock()
	defer m.knownMu.Unlock()
	return append([]int(nil), m.known[path]...)
}

// ---- outcomes -----------------------------------------------------------------

// classify maps an error to the model's status. Puts: refusals are definite;
// transport errors, timeouts and Unavailable are unknown outcomes.
func classify(err error, put bool) outStatus {
	if err == nil {
		return stOK
	}
	switch status.Code(err) {
	case codes.InvalidArgument, codes.FailedPrecondition, codes.AlreadyExists, codes.PermissionDenied, codes.ResourceExhausted, codes.OutOfRange:
		return stRejected
	case codes.NotFound:
		if put {
			return stRejected
		}
		return stNotFound
	case codes.DataLoss, codes.Internal:
		if put {
			return stUnknown
		}
		return stError
	}
	return stUnknown
}

// ---- Flight calls ---------------------------------------------------------------

// putStream sends one put (one DoPut: the clients never retry) and returns
// the raw app_metadata of the PutResult. abandon: send the first batch,
// then cancel the stream without ever ending it (raw Flight: the client
// never leaves a stream open).
func putStream(ctx context.Context, c *client.Client, path string, opts client.PutOptions, sc *arrow.Schema, recs []arrow.RecordBatch, abandon bool) ([]byte, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if !abandon {
		rdr, err := array.NewRecordReader(sc, recs)
		if err != nil {
			return nil, err
		}
		defer rdr.Release()
		return c.PutRaw(ctx, path, rdr, opts)
	}
	stream, err := c.Flight().DoPut(ctx)
	if err != nil {
		return nil, err
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc))
	w.SetFlightDescriptor(putDesc(path, opts))
	_ = w.Write(recs[0])
	time.Sleep(5 * time.Millisecond)
	cancel() // never Close: the stream must not end
	if _, err := stream.Recv(); err != nil {
		return nil, err
	}
	return nil, errors.New("abandoned put answered")
}

// putDesc is the CMD descriptor of a put, as the client sends it.
func putDesc(path string, opts client.PutOptions) *flight.FlightDescriptor {
	cmd := map[string]any{"path": path, "mode": opts.Mode, "request_id": opts.RequestID}
	if opts.Metadata != nil {
		cmd["metadata"] = opts.Metadata
	}
	if len(opts.PartitionBy) > 0 {
		cmd["partition_by"] = opts.PartitionBy
	}
	return cmdDesc(cmd)
}

// parseVer parses "v3" (or 3); -1 if it cannot.
func parseVer(v any) int {
	switch x := v.(type) {
	case string:
		n, err := strconv.Atoi(strings.TrimPrefix(x, "v"))
		if err != nil {
			return -1
		}
		return n
	case float64:
		return int(x)
	}
	return -1
}

// readRows reads a ticket and returns its rows (pid, rn and, when full,
// the canonical encoding) and the stream's schema.
func readRows(ctx context.Context, c *client.Client, ticket []byte, full bool) ([]rowObs, *arrow.Schema, error) {
	rdr, err := c.ReadTicket(ctx, ticket)
	if err != nil {
		return nil, nil, err
	}
	defer rdr.Release()
	var out []rowObs
	for rdr.Next() {
		rec := rdr.RecordBatch()
		pi, ri := -1, -1
		for i, f := range rec.Schema().Fields() {
			switch f.Name {
			case "pid":
				pi = i
			case "rn":
				ri = i
			}
		}
		for i := 0; i < int(rec.NumRows()); i++ {
			o := rowObs{null: true}
			if pi >= 0 {
				if v, ok := intAt(rec.Column(pi), i); ok {
					o.pid, o.null = v, false
				}
			}
			if ri >= 0 {
				if v, ok := intAt(rec.Column(ri), i); ok {
					o.rn = int32(v)
				}
			}
			if full {
				o.canon = canonRow(rec, i)
			}
			out = append(out, o)
		}
	}
	return out, rdr.Schema(), rdr.Err()
}

func intAt(a arrow.Array, i int) (int64, bool) {
	if a.IsNull(i) {
		return 0, false
	}
	switch c := a.(type) {
	case *array.Int64:
		return c.Value(i), true
	case *array.Int32:
		return int64(c.Value(i)), true
	}
	return 0, false
}

// ---- the operations -------------------------------------------------------------

// exec runs one generated operation and records it.
func (m *modelRun) exec(ctx context.Context, r *rand.Rand, phase, client int, g genOp, done *[]*mop) {
	o := &mop{Client: client, Phase: phase, genOp: g, Ver: -1}
	switch g.Kind {
	case opAppend, opWrite, opBad, opCancel:
		o.PID = m.pid.Add(1)
		m.doPut(ctx, r, o, nil)
		if o.St == stOK && g.Kind != opCancel {
			*done = append(*done, o)
		}
	case opDup:
		if len(*done) == 0 {
			return
		}
		first := (*done)[r.IntN(len(*done))]
		o.genOp = first.genOp
		o.Kind, o.Burst = opDup, 0
		o.genOp.Mode = first.putMode()
		o.PID = first.PID
		m.doPut(ctx, r, o, first)
		if first.St == stOK && o.St == stOK {
			o.Replayed = true
		}
	case opRead, opReadV:
		if g.Kind == opReadV {
			vs := m.knownVersions(g.Path)
			o.ReadVer = 0
			if len(vs) > 0 {
				o.ReadVer = vs[r.IntN(len(vs))]
				if r.IntN(5) == 0 {
					o.ReadVer = slices.Max(vs) + 1 // maybe a version being written
				}
			}
		}
		m.doRead(ctx, r, o, -1)
	case opLatest:
		m.doLatest(ctx, r, o, -1)
	case opCompact:
		m.doAction(ctx, r, o, "compact", map[string]any{"path": g.Path})
	case opRetain:
		m.doAction(ctx, r, o, "remove-old-versions", map[string]any{"path": g.Path, "keep": g.Keep, "grace_s": 0})
	case opSweep:
		m.doAction(ctx, r, o, "sweep", map[string]any{"older_than_s": 3600})
	case opList:
		m.doList(ctx, r, o, -1)
	case opBadKey:
		m.doBadKey(ctx, r, o)
	}
}

// badKeyRPCs are the calls a badkey op makes with a reserved key: every
// one must answer InvalidArgument.
var badKeyRPCs = []string{"info", "json", "bare", "readv", "schema", "list-versions", "lineage", "compact", "remove-old-versions", "break-lock", "verify"}

// doBadKey calls one RPC other than DoPut (o.Mode) with a reserved key.
func (m *modelRun) doBadKey(ctx context.Context, r *rand.Rand, o *mop) {
	slot, cl, _ := m.pick(r, -1)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	o.Call = m.now()
	var err error
	switch o.Mode {
	case "info":
		_, _, _, err = m.h.readInfo(rctx, cl, o)
	case "json":
		_, _, err = readRows(rctx, cl, js(map[string]any{"path": o.Path}), false)
	case "bare":
		_, _, err = readRows(rctx, cl, []byte(o.Path), false)
	case "readv":
		_, _, err = readRows(rctx, cl, js(map[string]any{"path": o.Path, "version": "v0"}), false)
	case "schema":
		_, err = cl.Schema(rctx, client.ReadRequest{Path: o.Path})
	case "remove-old-versions":
		_, err = action(rctx, cl, o.Mode, map[string]any{"path": o.Path, "keep": 1, "grace_s": 0})
	default:
		_, err = action(rctx, cl, o.Mode, map[string]any{"path": o.Path})
	}
	o.Ret = m.now()
	o.Code = codeName(err)
	o.Attempts = []mattempt{{Server: slot, Start: o.Call, End: o.Ret, Code: o.Code}}
	m.captureInternal(slot, o, o.Code)
	if err != nil {
		o.Err = err.Error()
		o.Attempts[0].Err = o.Err
	}
	o.St = classify(err, false)
	if o.St == stUnknown {
		o.Ret = -1
	}
	m.h.addOp(o)
}

// pick chooses a server (slot -1: a random one that is not restarting).
func (m *modelRun) pick(r *rand.Rand, slot int) (int, *client.Client, *atomic.Int64) {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	if slot < 0 {
		slot = r.IntN(len(m.c.procs))
		for try := 0; try < 8 && m.down[slot]; try++ {
			slot = r.IntN(len(m.c.procs))
		}
	}
	return slot, m.c.clients[slot], m.c.inflight[slot]
}

// killRestart SIGKILLs server i and starts a replacement on the same data
// dir; clients avoid the slot meanwhile. It returns how many operations
// were in flight on the victim.
func (m *modelRun) killRestart(i int) (int64, error) {
	m.c.mu.Lock()
	m.down[i] = true
	old, oldCl := m.c.procs[i], m.c.clients[i]
	inflight := m.c.inflight[i].Load()
	m.c.mu.Unlock()
	old.kill()
	m.h.mu.Lock()
	m.h.kills = append(m.h.kills, killEvent{At: m.now(), Server: i, InFlight: inflight})
	m.h.mu.Unlock()
	p, err := startProcOn(m.c.st, m.c.extra...)
	if err != nil {
		return inflight, err
	}
	cl, err := dial(p.addr)
	if err != nil {
		return inflight, err
	}
	m.c.mu.Lock()
	m.c.procs[i], m.c.clients[i] = p, cl
	m.c.inflight[i] = &atomic.Int64{}
	m.down[i] = false
	m.c.writeAddrs()
	m.c.mu.Unlock()
	time.AfterFunc(5*time.Second, func() { oldCl.Close() })
	return inflight, nil
}

// doPut runs a put (append, write, bad, cancel or a resend of first) with
// its retries and records it.
func (m *modelRun) doPut(ctx context.Context, r *rand.Rand, o *mop, first *mop) {
	g := o.genOp
	spec := dataSpec{pid: o.PID, fam: g.Fam, rows: g.Rows, batches: g.Batches, reorder: g.Reorder, seed: g.Seed, bad: g.Bad}
	if g.Bad == "bad-offsets" {
		spec.rows, spec.batches = max(spec.rows, 3), 1 // offset 1 must not be the last
	}
	if g.Fam == famPart && len(g.PartBy) > 0 && g.Seed%3 != 0 {
		spec.regions = regionValues[:3] // eu, us, null: few partition directories
	}
	if g.Bad == "hive-default" || g.Bad == "partby-unknown" {
		spec.regions = regionValues[:2]
	}
	d := buildPut(spec)
	defer d.release()
	batches := d.batches
	if g.Bad == "bad-offsets" {
		batches = []arrow.RecordBatch{crackOffsets(d.batches[0])}
		defer batches[0].Release()
	}
	if first == nil {
		m.h.addPut(&putInfo{PID: o.PID, Path: g.Path, Fam: g.Fam, Mode: o.putMode(), Bad: g.Bad, PartBy: g.PartBy, Rows: d.rows, Regions: d.regions, EmptyRegion: slices.ContainsFunc(d.regions, func(r *string) bool { return r != nil && *r == "" })})
	}
	opts := client.PutOptions{Mode: o.putMode(), RequestID: reqID(o.PID), Metadata: map[string]any{"client": o.Client, "pid": o.PID}}
	if len(g.PartBy) > 0 {
		opts.PartitionBy = g.PartBy
	}
	retries := 4
	if g.Kind == opCancel || g.Bad != "" {
		retries = 1
	}
	o.Call = m.now()
	o.St = stUnknown
	for a := 0; a < retries; a++ {
		slot, cl, inflight := m.pick(r, -1)
		inflight.Add(1)
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		start := m.now()
		meta, err := putStream(actx, cl, g.Path, opts, d.schema, batches, g.Kind == opCancel)
		end := m.now()
		cancel()
		inflight.Add(-1)
		at := mattempt{Server: slot, Start: start, End: end, Code: codeName(err)}
		if err != nil {
			at.Err = err.Error()
		}
		o.Attempts = append(o.Attempts, at)
		m.captureInternal(slot, o, at.Code)
		o.Code, o.Err = at.Code, at.Err
		if g.Kind == opCancel {
			o.St, o.Ret = stRejected, end
			break
		}
		st := classify(err, true)
		if st == stOK {
			o.St, o.Ret = stOK, end
			m.putResult(o, meta)
			break
		}
		if st == stRejected {
			// Definite only when every earlier attempt was definite too.
			if a == 0 {
				o.St, o.Ret = stRejected, end
			}
			break
		}
		if status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "lock") {
			if o.Note == "" {
				o.Note = m.breakLock(ctx, cl, g.Path)
			} else {
				m.breakLock(ctx, cl, g.Path)
			}
		}
		if a+1 < retries {
			time.Sleep(time.Duration(20<<a+r.IntN(20)) * time.Millisecond)
		}
	}
	if o.St == stUnknown {
		o.Ret = -1
	}
	m.h.addOp(o)
	if o.St == stOK {
		m.noteVersion(g.Path, o.Ver)
	}
}

// putResult parses an acknowledged put's app_metadata into o.
func (m *modelRun) putResult(o *mop, meta []byte) { m.h.putResult(o, meta) }

// putResult parses an acknowledged put's app_metadata into o.
func (h *history) putResult(o *mop, meta []byte) {
	var res map[string]any
	if err := json.Unmarshal(meta, &res); err != nil {
		h.f.add("bad-put-result", o.Path, nil, "app_metadata %q: %v", trim(string(meta), 200), err)
		return
	}
	o.Ver = parseVer(res["version"])
	if x, ok := res["index"].(float64); ok {
		o.Index = int(x)
	}
	if x, ok := res["rows"].(float64); ok {
		o.ResRows = int64(x)
	}
	if x, ok := res["seq"].(float64); ok {
		o.Seq = int64(x)
	}
	o.ResMode, _ = res["mode"].(string)
	if rid, _ := res["request_id"].(string); rid != reqID(o.PID) {
		h.f.add("bad-put-result", o.Path, nil, "put %d: result request_id %q, want %q", o.PID, rid, reqID(o.PID))
	}
	if o.Ver < 0 {
		h.f.add("bad-put-result", o.Path, nil, "put %d: result version %v", o.PID, res["version"])
	}
}

// crackOffsets returns rec with the offsets of its string column t made
// non-monotonic and out of range (a crafted IPC body): the writer still
// sends it, and the server must refuse it.
func crackOffsets(rec arrow.RecordBatch) arrow.RecordBatch {
	ci := rec.Schema().FieldIndices("t")[0]
	col := rec.Column(ci).Data()
	offs := append([]byte(nil), col.Buffers()[1].Bytes()...)
	o32 := arrow.Int32Traits.CastFromBytes(offs)
	o32[1] = 1 << 30
	data := array.NewData(col.DataType(), col.Len(), []*memory.Buffer{col.Buffers()[0], memory.NewBufferBytes(offs), col.Buffers()[2]}, nil, col.NullN(), col.Offset())
	defer data.Release()
	arr := array.MakeFromData(data)
	defer arr.Release()
	cols := append([]arrow.Array(nil), rec.Columns()...)
	cols[ci] = arr
	return array.NewRecordBatch(rec.Schema(), cols, rec.NumRows())
}

// breakLock asks for the profile's manifest lock to be broken (only a
// lock whose owner is provably gone is) and says what the server answered.
func (m *modelRun) breakLock(ctx context.Context, cl *client.Client, path string) string {
	bctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	res, err := action(bctx, cl, "break-lock", map[string]any{"path": path})
	if err != nil {
		return "break-lock: " + err.Error()
	}
	if len(res) == 1 && strings.Contains(string(res[0]), `"broken":true`) {
		m.breaks.Add(1)
	}
	if len(res) == 1 {
		return "break-lock: " + string(res[0])
	}
	return fmt.Sprintf("break-lock: %d results", len(res))
}

// doRead reads the latest version (o.Read says how) or version o.ReadVer
// (readv), checks the rows and records the puts it saw.
func (m *modelRun) doRead(ctx context.Context, r *rand.Rand, o *mop, slot int) {
	slot, cl, _ := m.pick(r, slot)
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	full := o.Read != "cols"
	tk := map[string]any{"path": o.Path}
	if o.Kind == opReadV {
		tk["version"] = "v" + strconv.Itoa(o.ReadVer)
	}
	switch o.Read {
	case "cols":
		tk["columns"] = []string{"pid", "rn"}
	case "part":
		o.Filter = regionValues[r.IntN(3)]
		var v any
		if o.Filter != nil {
			v = *o.Filter
		}
		tk["partition"] = map[string]any{"region": v}
	}
	o.Call = m.now()
	var rows []rowObs
	var sc *arrow.Schema
	var err error
	switch o.Read {
	case "bare":
		rows, sc, err = readRows(rctx, cl, []byte(o.Path), full)
	case "info":
		rows, sc, o.Ver, err = m.h.readInfo(rctx, cl, o)
	default:
		rows, sc, err = readRows(rctx, cl, js(tk), full)
	}
	o.Ret = m.now()
	o.Code = codeName(err)
	o.Attempts = []mattempt{{Server: slot, Start: o.Call, End: o.Ret, Code: o.Code}}
	m.captureInternal(slot, o, o.Code)
	if err != nil {
		o.Err = err.Error()
		o.Attempts[0].Err = o.Err
	}
	o.St = classify(err, false)
	if o.Kind == opReadV && o.St == stOK {
		o.Ver = o.ReadVer
	}
	if o.St == stUnknown {
		o.Ret = -1
	}
	m.h.addOp(o)
	if o.St != stOK {
		return
	}
	o.IDs = m.h.checkRows(o, rows, full, o.Filter, o.Read == "part")
	if o.IDs == nil {
		o.IDs = []int64{}
	}
	for _, id := range o.IDs {
		m.h.observe(id, observation{op: o.ID, ver: o.Ver, ret: o.Ret})
	}
	if full && len(o.IDs) > 0 {
		m.checkSchema(o, sc)
	}
	m.noteVersion(o.Path, o.Ver)
}

// readInfo plans a read with GetFlightInfo and fetches every endpoint: one
// pinned version.
func (h *history) readInfo(ctx context.Context, cl *client.Client, o *mop) ([]rowObs, *arrow.Schema, int, error) {
	plan, err := cl.Plan(ctx, client.ReadRequest{Path: o.Path})
	if err != nil {
		return nil, nil, -1, err
	}
	fi := plan.Info
	ver := -1
	var rows []rowObs
	var sc *arrow.Schema
	for _, ep := range fi.Endpoint {
		var tk map[string]any
		if err := json.Unmarshal(ep.Ticket.Ticket, &tk); err != nil {
			return nil, nil, -1, fmt.Errorf("endpoint ticket %q: %w", trim(string(ep.Ticket.Ticket), 100), err)
		}
		v := parseVer(tk["version"])
		if ver >= 0 && v != ver {
			h.f.add("flightinfo-mixed-versions", o.Path, nil, "endpoints of one FlightInfo pin v%d and v%d", ver, v)
		}
		ver = v
		rs, s, err := readRows(ctx, cl, ep.Ticket.Ticket, true)
		if err != nil {
			return nil, nil, -1, err
		}
		rows, sc = append(rows, rs...), s
	}
	if fi.TotalRecords >= 0 && int64(len(rows)) != fi.TotalRecords {
		h.f.add("flightinfo-total-records", o.Path, nil, "FlightInfo says %d records, its endpoints held %d", fi.TotalRecords, len(rows))
	}
	return rows, sc, ver, nil
}

// checkSchema compares a read's schema with the schema its rows were put
// with (names, types, nullability; not order).
func (m *modelRun) checkSchema(o *mop, sc *arrow.Schema) {
	if sc == nil {
		return
	}
	fam := -1
	for _, id := range o.IDs {
		p := m.h.put(id)
		if p == nil {
			continue
		}
		if fam >= 0 && p.Fam != fam {
			m.h.f.add("mixed-schemas", o.Path, []int{o.ID}, "one read returned rows of families %s and %s", families[fam].name, families[p.Fam].name)
			return
		}
		if p.Bad == "dup-columns" {
			return
		}
		fam = p.Fam
	}
	if fam < 0 {
		return
	}
	want := map[string]arrow.Field{}
	for _, f := range families[fam].schema.Fields() {
		want[f.Name] = f
	}
	var diffs []string
	for _, f := range sc.Fields() {
		w, ok := want[f.Name]
		switch {
		case !ok:
			diffs = append(diffs, "extra column "+f.Name)
		case !arrow.TypeEqual(w.Type, f.Type):
			diffs = append(diffs, fmt.Sprintf("%s: put %s, read %s", f.Name, w.Type, f.Type))
		case w.Nullable != f.Nullable:
			diffs = append(diffs, fmt.Sprintf("%s: put nullable=%v, read nullable=%v", f.Name, w.Nullable, f.Nullable))
		}
		delete(want, f.Name)
	}
	if o.Read != "cols" {
		for n := range want {
			diffs = append(diffs, "missing column "+n)
		}
	}
	if len(diffs) > 0 {
		sort.Strings(diffs)
		m.h.f.add("schema-changed", o.Path, []int{o.ID}, "family %s: %s", families[fam].name, strings.Join(diffs, "; "))
	}
}

// doLatest asks list-versions for the latest version and its rows.
func (m *modelRun) doLatest(ctx context.Context, r *rand.Rand, o *mop, slot int) *versionList {
	slot, cl, _ := m.pick(r, slot)
	actx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	o.Call = m.now()
	vl, err := listVersions(actx, cl, o.Path)
	o.Ret = m.now()
	o.Code = codeName(err)
	o.Attempts = []mattempt{{Server: slot, Start: o.Call, End: o.Ret, Code: o.Code}}
	m.captureInternal(slot, o, o.Code)
	if err != nil {
		o.Err = err.Error()
	}
	o.St = classify(err, false)
	o.ResRows = -1
	if o.St == stOK {
		o.Ver = parseVer(vl.Latest)
		for _, v := range vl.Versions {
			if v.Version == vl.Latest {
				o.ResRows = v.Rows
			}
		}
	}
	if o.St == stUnknown {
		o.Ret = -1
	}
	m.h.addOp(o)
	m.noteVersion(o.Path, o.Ver)
	if o.St != stOK {
		return nil
	}
	return vl
}

// doAction runs compact, remove-old-versions or sweep.
func (m *modelRun) doAction(ctx context.Context, r *rand.Rand, o *mop, typ string, body any) [][]byte {
	slot, cl, inflight := m.pick(r, -1)
	inflight.Add(1)
	defer inflight.Add(-1)
	actx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	o.Call = m.now()
	res, err := action(actx, cl, typ, body)
	o.Ret = m.now()
	o.Code = codeName(err)
	o.Attempts = []mattempt{{Server: slot, Start: o.Call, End: o.Ret, Code: o.Code}}
	m.captureInternal(slot, o, o.Code)
	if err != nil {
		o.Err = err.Error()
	}
	o.St = classify(err, o.Kind == opCompact || o.Kind == opRetain)
	if o.St == stRejected && status.Code(err) == codes.NotFound {
		o.St = stNotFound
	}
	if o.St == stOK && len(res) == 1 {
		var x map[string]any
		if err := json.Unmarshal(res[0], &x); err == nil {
			switch typ {
			case "compact":
				compactResult(o, x)
			case "remove-old-versions":
				o.Removed = []int{}
				rm, _ := x["removed"].([]any)
				for _, v := range rm {
					o.Removed = append(o.Removed, parseVer(v))
				}
			}
		}
	}
	if o.St == stUnknown {
		o.Ret = -1
	}
	m.h.addOp(o)
	m.noteVersion(o.Path, o.Ver)
	return res
}

// compactResult reads a compact action's result into o: the version, the
// commit's seq, its rows and the version it compacted.
func compactResult(o *mop, x map[string]any) {
	o.Ver = parseVer(x["version"])
	if s, ok := x["seq"].(float64); ok {
		o.Seq = int64(s)
	}
	if n, ok := x["rows"].(float64); ok {
		o.ResRows = int64(n)
	}
	if md, ok := x["metadata"].(map[string]any); ok {
		if f, ok := md["compacted_from"].(string); ok {
			if v := parseVer(f); v >= 0 {
				o.From = &v
			}
		}
	}
}

// doList runs ListFlights and returns profile → total records. Two
// profiles one inside the other is a finding at once.
func (m *modelRun) doList(ctx context.Context, r *rand.Rand, o *mop, slot int) map[string]int64 {
	slot, cl, _ := m.pick(r, slot)
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	o.Call = m.now()
	out := map[string]int64{}
	profiles, err := cl.List(lctx, "")
	for _, p := range profiles {
		out[p.Path] = p.TotalRecords
	}
	o.Ret = m.now()
	o.Code = codeName(err)
	o.St = classify(err, false)
	o.Attempts = []mattempt{{Server: slot, Start: o.Call, End: o.Ret, Code: o.Code}}
	m.captureInternal(slot, o, o.Code)
	if err != nil {
		o.Err = err.Error()
		out = nil
	}
	m.h.addOp(o)
	var names []string
	for p := range out {
		names = append(names, p)
	}
	sort.Strings(names)
	for i, p := range names {
		for _, q := range names[i+1:] {
			if nestedPair(p, q) {
				m.h.f.add("nested-profiles-both-exist", p, []int{o.ID}, "ListFlights lists %q and %q", trim(p, 60), trim(q, 60))
			}
		}
	}
	return out
}

// captureInternal keeps the log of the server that answered Internal
// (its message says only "see server log"): its error lines go to the
// op's note, the log's tail to internal-<client>-<call>.log in the output
// directory.
func (m *modelRun) captureInternal(slot int, o *mop, code string) {
	if code != "Internal" {
		return
	}
	m.c.mu.Lock()
	logs := m.c.procs[slot].Logs()
	m.c.mu.Unlock()
	var errs []string
	for _, l := range strings.Split(logs, "\n") {
		if strings.Contains(l, `"level":"error"`) || strings.Contains(l, "panic") {
			errs = append(errs, l)
		}
	}
	if len(errs) > 0 {
		o.Note = "server log: " + trim(errs[len(errs)-1], 400)
	}
	if os.MkdirAll(m.outDir, 0o755) == nil {
		_ = os.WriteFile(filepath.Join(m.outDir, fmt.Sprintf("internal-c%d-%d.log", o.Client, o.Call)), []byte(logs[max(0, len(logs)-64<<10):]), 0o644)
	}
}

// ---- clients, kills, phases ---------------------------------------------------

// barrier starts the ops of one burst together.
type barrier struct {
	mu sync.Mutex
	m  map[int]chan struct{}
	n  map[int]int
}

func (b *barrier) wait(id, parties int) {
	b.mu.Lock()
	if b.m == nil {
		b.m, b.n = map[int]chan struct{}{}, map[int]int{}
	}
	ch, ok := b.m[id]
	if !ok {
		ch = make(chan struct{})
		b.m[id] = ch
	}
	b.n[id]++
	if b.n[id] == parties {
		close(ch)
	}
	b.mu.Unlock()
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
	}
}

// runPhase runs every client's operations of one phase while the killer
// kills servers after chosen numbers of completed operations.
func (m *modelRun) runPhase(ctx context.Context, phase int, ops [][]genOp, kills int) {
	var bar barrier
	var wg sync.WaitGroup
	base := m.opsDone.Load()
	total := 0
	for _, l := range ops {
		total += len(l)
	}
	stop := make(chan struct{})
	kdone := make(chan struct{})
	go func() {
		defer close(kdone)
		m.killer(ctx, phase, base, total, kills, stop)
	}()
	mdone := make(chan struct{})
	go func() { // restart a server that crashed at once (and report it)
		defer close(mdone)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				m.killMu.Lock()
				m.checkAlive(phase)
				m.killMu.Unlock()
			}
		}
	}()
	for c, list := range ops {
		wg.Add(1)
		go func(c int, list []genOp) {
			defer wg.Done()
			r := rand.New(rand.NewPCG(m.seed, uint64(phase)<<16|uint64(c)))
			var done []*mop
			for _, g := range list {
				if ctx.Err() != nil {
					return
				}
				if g.Burst > 0 {
					bar.wait(g.Burst, len(ops))
				}
				m.exec(ctx, r, phase, c, g, &done)
				m.opsDone.Add(1)
			}
		}(c, list)
	}
	wg.Wait()
	close(stop)
	<-kdone
	<-mdone
}

// killer SIGKILLs a server (one with operations in flight if it can)
// each time the phase passes one of kills random numbers of completed
// operations, and restarts it on the same data dir.
func (m *modelRun) killer(ctx context.Context, phase int, base int64, total, kills int, stop <-chan struct{}) {
	r := rand.New(rand.NewPCG(m.seed, uint64(phase)<<16|0xffff))
	var at []int
	for i := 0; i < kills; i++ {
		at = append(at, total/10+r.IntN(max(1, total*8/10)))
	}
	sort.Ints(at)
	for _, n := range at {
		for m.opsDone.Load()-base < int64(n) {
			select {
			case <-stop:
				return
			case <-ctx.Done():
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
		victim := r.IntN(m.cfg.Servers)
		for try := 0; try < 50; try++ {
			m.c.mu.Lock()
			busy := m.c.inflight[victim].Load()
			m.c.mu.Unlock()
			if busy > 0 {
				break
			}
			victim = r.IntN(m.cfg.Servers)
			time.Sleep(2 * time.Millisecond)
		}
		m.sinceSwp.Store(true)
		m.sinceBrk.Store(true)
		m.killMu.Lock()
		inflight, err := m.killRestart(victim)
		m.killMu.Unlock()
		if err != nil {
			m.t.Errorf("restart after a kill: %v", err)
			return
		}
		m.kills.Add(1)
		if inflight > 0 {
			m.killsMid.Add(1)
		}
	}
}

// restartAll stops every server with SIGTERM (it must exit 0) and starts
// new ones on the same data dir.
func (m *modelRun) restartAll() {
	m.c.mu.Lock()
	defer m.c.mu.Unlock()
	for i, p := range m.c.procs {
		m.c.clients[i].Close()
		p.stop(m.t)
		np, err := startProcOn(m.c.st, m.c.extra...)
		if err != nil {
			m.t.Fatalf("restart: %v", err)
		}
		cl, err := dial(np.addr)
		if err != nil {
			m.t.Fatalf("dial: %v", err)
		}
		m.c.procs[i], m.c.clients[i] = np, cl
	}
	m.c.writeAddrs()
}

// ---- the check between phases -------------------------------------------------

// checkAlive: no server exited on its own (a request that crashes the
// process); a dead one is replaced so the run can go on.
func (m *modelRun) checkAlive(phase int) {
	for i := 0; i < m.cfg.Servers; i++ {
		m.c.mu.Lock()
		p, down := m.c.procs[i], m.down[i]
		m.c.mu.Unlock()
		if down {
			continue // being killed and restarted by the killer
		}
		select {
		case <-p.Done():
		default:
			continue
		}
		logs := p.Logs()
		file := filepath.Join(m.outDir, fmt.Sprintf("server-exit-phase%d-slot%d.log", phase, i))
		if os.MkdirAll(m.outDir, 0o755) == nil {
			_ = os.WriteFile(file, []byte(logs), 0o644)
		}
		for _, h := range []string{"\npanic: ", "\nfatal error: ", "panic: "} {
			if j := strings.Index(logs, h); j >= 0 {
				logs = logs[j:]
				break
			}
		}
		m.sinceSwp.Store(true) // a crash leaves what a kill leaves
		m.sinceBrk.Store(true)
		m.h.f.add("server-exited", "", nil, "in phase %d server %d exited by itself (%v); log (%s): %s", phase, i, p.Err(), file, trim(logs, 700))
		if _, err := m.killRestart(i); err != nil {
			m.t.Fatalf("restart: %v", err)
		}
	}
}

// verifyAllowed: problem kinds a verify may report, given what happened
// since the last sweep and break-lock.
func (m *modelRun) verifyAllowed() map[string]bool {
	ok := map[string]bool{}
	if m.sinceSwp.Load() {
		ok["orphan"], ok["stale_temp"] = true, true
	}
	if m.sinceBrk.Load() {
		ok["stale_lock"] = true
	}
	return ok
}

// checkPhase: with no client running, every server lists the same
// profiles, exactly the ones the history says exist; every version of
// every profile is read (and recorded in the history); verify is clean but
// for what kills leave; after a sweep and break-lock it is clean.
func (m *modelRun) checkPhase(ctx context.Context, phase int, final, sweep bool) {
	r := rand.New(rand.NewPCG(m.seed, uint64(phase)<<16|0xfffe))
	client := -1 - phase
	time.Sleep(100 * time.Millisecond) // a server hit by the phase's last request may still be dying
	m.checkAlive(phase)
	var lists []map[string]int64
	for s := 0; s < m.cfg.Servers; s++ {
		var l map[string]int64
		var lo *mop
		for try := 0; try < 3 && l == nil; try++ {
			if try > 0 {
				time.Sleep(300 * time.Millisecond)
				m.checkAlive(phase)
			}
			lo = &mop{Client: client, Phase: phase, genOp: genOp{Kind: opList}, Ver: -1}
			l = m.doList(ctx, r, lo, s)
		}
		if l == nil {
			m.h.f.add("listflights-failed", "", []int{lo.ID}, "after phase %d ListFlights on server %d failed three times: %s", phase, s, trim(lo.Err, 200))
			continue
		}
		lists = append(lists, l)
	}
	var listed map[string]int64 // nil: ListFlights failed everywhere (checked below without it)
	if len(lists) > 0 {
		listed = lists[0]
	}
	for s := 1; s < len(lists); s++ {
		if fmt.Sprint(sortedKeys(lists[s])) != fmt.Sprint(sortedKeys(listed)) {
			m.h.f.add("listflights-servers-disagree", "", nil, "after phase %d one server lists %d profiles, another %d", phase, len(listed), len(lists[s]))
		}
	}
	acked, attempted := map[string]bool{}, map[string]bool{}
	m.h.mu.Lock()
	for _, o := range m.h.ops {
		if o.isPut() {
			if o.St == stOK {
				acked[o.Path] = true
			}
			if o.St == stOK || o.St == stUnknown {
				attempted[o.Path] = true
			}
		}
	}
	m.h.mu.Unlock()
	for p := range acked {
		if _, ok := listed[p]; !ok && listed != nil {
			m.h.f.add("listflights-missing", p, nil, "after phase %d: a put to it was acknowledged, ListFlights does not list it", phase)
		}
	}
	for p := range listed {
		if !attempted[p] {
			m.h.f.add("listflights-phantom", p, nil, "after phase %d ListFlights lists it, but every put to it was refused", phase)
		}
	}
	paths := map[string]bool{}
	for p := range listed {
		paths[p] = true
	}
	for p := range attempted {
		if keyKindOf(p) != keyReserved { // a refused key is not read back (unless it was accepted)
			paths[p] = true
		}
	}
	for _, p := range sortedKeys(paths) {
		m.checkProfile(ctx, r, phase, client, p, listed, final)
	}
	m.checkResidue(phase, acked, attempted)
	m.verifyPhase(ctx, phase, "", m.verifyAllowed())
	if sweep {
		_, cl, _ := m.pick(r, 0)
		sctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		if _, err := action(sctx, cl, "sweep", map[string]any{"older_than_s": 0}); err != nil {
			m.h.f.add("sweep-failed", "", nil, "after phase %d: sweep: %v", phase, err)
		}
		for p := range listed {
			_, _ = action(sctx, cl, "break-lock", map[string]any{"path": p})
		}
		cancel()
		m.sinceSwp.Store(false)
		m.sinceBrk.Store(false)
		m.verifyPhase(ctx, phase, " after sweep and break-lock", map[string]bool{})
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// checkProfile reads every version of one profile (list-versions, then a
// pinned read of each), its latest through GetFlightInfo, and its lineage.
func (m *modelRun) checkProfile(ctx context.Context, r *rand.Rand, phase, client int, p string, listed map[string]int64, final bool) {
	lo := &mop{Client: client, Phase: phase, genOp: genOp{Kind: opLatest, Path: p}, Ver: -1}
	vl := m.doLatest(ctx, r, lo, 0)
	ro := &mop{Client: client, Phase: phase, genOp: genOp{Kind: opRead, Path: p, Read: "info"}, Ver: -1}
	m.doRead(ctx, r, ro, 0)
	if n, ok := listed[p]; ok && ro.St == stOK {
		var rows int64
		for _, id := range ro.IDs {
			if pi := m.h.put(id); pi != nil {
				rows += int64(len(pi.Rows))
			}
		}
		if n != rows {
			m.h.f.add("listflights-total-records", p, []int{ro.ID}, "ListFlights says %d records; the latest version holds %d", n, rows)
		}
	}
	if final {
		m.h.mu.Lock()
		m.h.final[p] = map[int][]int64{}
		m.h.mu.Unlock()
	}
	if vl == nil {
		return
	}
	for _, v := range vl.Versions {
		o := &mop{Client: client, Phase: phase, genOp: genOp{Kind: opReadV, Path: p, Read: "json"}, ReadVer: parseVer(v.Version), Ver: -1}
		m.doRead(ctx, r, o, 0)
		switch {
		case o.St == stOK && final:
			m.h.mu.Lock()
			m.h.final[p][o.ReadVer] = o.IDs
			m.h.mu.Unlock()
		case o.St != stOK:
			m.h.f.add("listed-version-unreadable", p, []int{o.ID}, "list-versions lists %s; reading it: %s %s", v.Version, o.Code, trim(o.Err, 200))
		}
		if o.St == stOK && v.Rows >= 0 {
			var rows int64
			for _, id := range o.IDs {
				if pi := m.h.put(id); pi != nil {
					rows += int64(len(pi.Rows))
				}
			}
			if rows != v.Rows {
				m.h.f.add("list-versions-rows", p, []int{o.ID}, "list-versions says %s holds %d rows; reading it gave puts with %d", v.Version, v.Rows, rows)
			}
		}
	}
	// Lineage: one record per put; request ids never twice.
	_, cl, _ := m.pick(r, 0)
	lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	recs, err := action(lctx, cl, "lineage", map[string]any{"path": p})
	if err != nil {
		m.h.f.add("lineage-failed", p, nil, "after phase %d: %v", phase, err)
		return
	}
	// The records follow each other by seq (1, 2, 3…); a request id is
	// committed once. A record answered twice (the same seq again) is
	// reported once per call and left out, so that it is not also taken
	// for a second commit or a retention nobody asked for.
	seqOf := map[string]int64{}
	lin := map[string]int{}
	var all []linRec
	var last int64
	repeated, firstBad := 0, ""
	for _, b := range recs {
		var rec struct {
			Seq       int64           `json:"seq"`
			Version   string          `json:"version"`
			Mode      string          `json:"mode"`
			RequestID string          `json:"request_id"`
			Committed time.Time       `json:"committed"`
			Metadata  json.RawMessage `json:"metadata"`
		}
		if err := json.Unmarshal(b, &rec); err != nil {
			m.h.f.add("lineage-failed", p, nil, "record %q: %v", trim(string(b), 100), err)
			continue
		}
		if rec.Seq > 0 {
			if rec.Seq != last+1 {
				repeated++
				if firstBad == "" {
					firstBad = fmt.Sprintf("record %d (%s %s %s) after record %d", rec.Seq, rec.Mode, rec.Version, rec.RequestID, last)
				}
			}
			if rec.Seq <= last {
				continue
			}
			last = rec.Seq
		}
		lr := linRec{Seq: rec.Seq, Version: parseVer(rec.Version), Mode: rec.Mode, RequestID: rec.RequestID, From: -1, At: rec.Committed.UnixNano() - m.t0.UnixNano()}
		if rec.RequestID == "" && rec.Mode == "write" && len(rec.Metadata) > 0 {
			var md struct {
				From string `json:"compacted_from"`
			}
			if json.Unmarshal(rec.Metadata, &md) == nil && md.From != "" {
				lr.From = parseVer(md.From)
			}
		}
		all = append(all, lr)
		rid := rec.RequestID
		if rid == "" || rec.Mode == "retire" {
			continue
		}
		if s, ok := seqOf[rid]; ok && s != rec.Seq {
			m.h.f.add("request-id-committed-twice", p, nil, "lineage holds two records with request_id %s (seq %d in v%d, seq %d in %s)", rid, s, lin[rid], rec.Seq, rec.Version)
		}
		seqOf[rid] = rec.Seq
		lin[rid] = lr.Version
	}
	if repeated > 0 {
		m.h.f.add("lineage-out-of-order", p, nil, "after phase %d lineage answered %d of %d records out of seq order (first: %s)", phase, repeated, len(recs), firstBad)
	}
	if final {
		m.h.mu.Lock()
		m.h.lineage[p] = lin
		m.h.records[p] = all
		m.h.mu.Unlock()
	}
}

// checkResidue: a key every put to which was refused has no directory in
// the data dir (unless a profile lies below it): refused input leaves
// nothing behind.
func (m *modelRun) checkResidue(phase int, acked, attempted map[string]bool) {
	refused := map[string]bool{}
	m.h.mu.Lock()
	for _, o := range m.h.ops {
		if o.isPut() && o.St == stRejected && !attempted[o.Path] {
			refused[o.Path] = true
		}
	}
	m.h.mu.Unlock()
	for _, p := range sortedKeys(refused) {
		clean := true
		for _, k := range keySplit(p) {
			if k == "" || k == "." || k == ".." || strings.HasPrefix(k, ".") || strings.ContainsAny(k, "\\\x00") {
				clean = false
			}
		}
		below := false // a profile below p, or p is a name inside a profile above it
		for q := range attempted {
			if strings.HasPrefix(q, p+"/") || strings.HasPrefix(p, q+"/") {
				below = true
			}
		}
		if !clean || below {
			continue
		}
		dir := filepath.Join(m.c.dataDir, filepath.FromSlash(p))
		if _, err := os.Lstat(dir); err != nil {
			continue
		}
		var found []string
		_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if rel, rerr := filepath.Rel(m.c.dataDir, path); rerr == nil && len(found) < 6 {
				found = append(found, filepath.ToSlash(rel))
			}
			return nil
		})
		m.h.f.add("refused-put-left-residue", p, nil, "after phase %d: every put to %q was refused, yet the data dir holds %s", phase, trim(p, 60), strings.Join(found, ", "))
	}
}

// verifyPhase runs verify {} and records problems not in allowed.
func (m *modelRun) verifyPhase(ctx context.Context, phase int, when string, allowed map[string]bool) {
	_, cl, _ := m.pick(nil, 0)
	vctx, cancel := context.WithTimeout(ctx, 120*time.Second)
	defer cancel()
	vr, err := verify(vctx, cl, map[string]any{})
	if err != nil {
		m.h.f.add("verify", "", nil, "after phase %d%s: verify failed: %v", phase, when, err)
		return
	}
	var bad []string
	for _, p := range vr.Problems {
		if !allowed[p.Kind] {
			bad = append(bad, fmt.Sprintf("%s %s (%s)", p.Kind, trim(p.Path, 80), trim(p.Detail, 120)))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		m.h.f.add("verify", "", nil, "after phase %d%s (kill since last sweep: %v): %d problems: %s", phase, when, len(allowed) > 0, len(bad), strings.Join(bad[:min(len(bad), 6)], "; "))
	}
}

// isNestedRefusal: whether a refusal says the profile would nest in (or
// above) another.
func isNestedRefusal(msg string) bool {
	msg = strings.ToLower(msg)
	return strings.Contains(msg, "nested") || strings.Contains(msg, "inside profile") || strings.Contains(msg, "above other profiles")
}

// ---- the whole run ------------------------------------------------------------

// runModel runs a seeded model test of cfg's size and fails t with every
// broken invariant, the operations involved and the seed.
func runModel(t *testing.T, seed uint64, cfg genConfig) {
	fmt.Printf("model: seed %d; replay with %s=%d\n", seed, modelSeedEnv, seed)
	t.Logf("seed %d (replay with %s=%d); %+v", seed, modelSeedEnv, seed, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Minute)
	defer cancel()
	m := &modelRun{t: t, seed: seed, cfg: cfg, h: newHistory(), known: map[string][]int{}, down: map[int]bool{}}
	m.outDir = os.Getenv("QUIVER_MODEL_OUT")
	if m.outDir == "" {
		m.outDir = filepath.Join(os.TempDir(), fmt.Sprintf("quiver-model-%d", seed))
	}
	m.c = newCluster(t, cfg.Servers, "--lock-timeout", "3s")
	m.t0 = time.Now()
	gen := newGenerator(seed, cfg)
	kills := 0
	for ph := 0; ph < cfg.Phases; ph++ {
		ops := gen.phase(ph)
		k := cfg.KillsPerPhase
		if ph == 0 && cfg.Phases > 1 {
			k = 0 // the first phase runs without faults
		}
		p0 := time.Now()
		m.runPhase(ctx, ph, ops, k)
		kills += k
		last := ph == cfg.Phases-1
		m.checkPhase(ctx, ph, last, last || ph%2 == 1)
		t.Logf("phase %d: %d ops in %.1fs; kills so far %d (%d mid-operation); findings so far %d",
			ph, len(m.h.ops), time.Since(p0).Seconds(), m.kills.Load(), m.killsMid.Load(), len(m.h.f.all()))
		if !last && ph%3 == 2 {
			m.restartAll()
		}
		if ctx.Err() != nil {
			break
		}
	}
	m.h.finalAt = m.now()
	lin := m.h.checkHistory(ctx, cfg.CheckTimeout)
	m.summarize(lin)
}

// summarize prints the run's figures and, on findings, the report, the
// history file and the replay line.
func (m *modelRun) summarize(lin []linResult) {
	t := m.t
	byKind := counter{}
	outcomes := counter{}
	for _, o := range m.h.ops {
		byKind.inc(o.Kind)
		outcomes.inc(o.Kind + ":" + o.St.String())
	}
	nested := counter{}
	for _, o := range m.h.ops {
		if o.isPut() && o.St == stRejected && isNestedRefusal(o.Err) {
			nested.inc(o.Code)
		}
	}
	linOK, linBad, linUnknown := 0, 0, 0
	for _, l := range lin {
		switch l.Result {
		case "Ok":
			linOK++
		case "Illegal":
			linBad++
		default:
			linUnknown++
		}
	}
	report(t, "seed=%d ops=%d (%s); kills=%d (mid-operation %d); lock breaks=%d", m.seed, len(m.h.ops), byKind.String(), m.kills.Load(), m.killsMid.Load(), m.breaks.Load())
	report(t, "outcomes: %s", outcomes.String())
	report(t, "refusals of puts as nested profiles, by code: %s", nested.String())
	report(t, "porcupine: %d profiles linearizable, %d not, %d timed out", linOK, linBad, linUnknown)
	report(t, "appends answered after an overlapping write or compaction, committed before it (by seq; a race of answers, legal): %s", m.h.ackRaces)
	report(t, "unknown outcomes resolved: %s", m.h.resolvedCounts())
	fs := m.h.f.all()
	if len(fs) == 0 {
		return
	}
	if err := m.h.dump(filepath.Join(m.outDir, "history.json"), m.seed, m.cfg); err != nil {
		t.Logf("history: %v", err)
	}
	defer func() { // visualizations last: they are a help, not the verdict
		for i, l := range lin {
			if l.Result == "Illegal" {
				func() {
					defer func() { _ = recover() }()
					_ = porcupine.VisualizePath(m.h.model, l.Info, filepath.Join(m.outDir, fmt.Sprintf("profile-%d.html", i)))
				}()
			}
		}
	}()
	t.Errorf("model test: %d broken invariants (seed %d)%s\n\nhistory and visualizations: %s\nreplay with %s=%d (the operations replay exactly; the interleaving and kill moments may differ)",
		len(fs), m.seed, m.h.report(lin, 4), m.outDir, modelSeedEnv, m.seed)
}
