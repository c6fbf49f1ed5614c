package reliability

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/quiverdb/quiver/catalog"
	"github.com/quiverdb/quiver/client"
	"github.com/quiverdb/quiver/internal/quivertest"
)

// hashTree hashes every entry under dir: relative path, type, symlink
// target and file content.
func hashTree(t *testing.T, dir string) (string, []string) {
	t.Helper()
	h := sha256.New()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		names = append(names, rel)
		fmt.Fprintf(h, "%s\x00%v\x00", rel, d.Type())
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			h.Write([]byte(l))
		case d.Type().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			h.Write(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return hex.EncodeToString(h.Sum(nil)), names
}

func diffNames(a, b []string) string {
	in := map[string]int{}
	for _, n := range a {
		in[n]--
	}
	for _, n := range b {
		in[n]++
	}
	var out []string
	for n, k := range in {
		if k > 0 {
			out = append(out, "+"+n)
		} else if k < 0 {
			out = append(out, "-"+n)
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "(same names, content changed)"
	}
	return strings.Join(out, " ")
}

// capture collects the FlightData messages a RecordWriter sends, so tests
// can replay them mangled.
type capture struct{ msgs []*flight.FlightData }

func (c *capture) Send(fd *flight.FlightData) error {
	c.msgs = append(c.msgs, &flight.FlightData{
		FlightDescriptor: fd.FlightDescriptor,
		DataHeader:       append([]byte(nil), fd.DataHeader...),
		DataBody:         append([]byte(nil), fd.DataBody...),
		AppMetadata:      fd.AppMetadata,
	})
	return nil
}

// encode returns the messages of one stream: schema, then recs.
func encode(desc *flight.FlightDescriptor, sc *arrow.Schema, recs ...arrow.RecordBatch) []*flight.FlightData {
	c := &capture{}
	w := flight.NewRecordWriter(c, ipc.WithSchema(sc))
	w.SetFlightDescriptor(desc)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			panic(err)
		}
	}
	_ = w.Close()
	return c.msgs
}

// putRaw sends messages as one DoPut and returns the server's answer.
func putRaw(ctx context.Context, c flight.Client, msgs []*flight.FlightData) error {
	stream, err := c.DoPut(ctx)
	if err != nil {
		return err
	}
	for _, m := range msgs {
		if err := stream.Send(m); err != nil {
			break
		}
	}
	_ = stream.CloseSend()
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func getAll(ctx context.Context, c flight.Client, ticket []byte) error {
	stream, err := c.DoGet(ctx, &flight.Ticket{Ticket: ticket})
	if err != nil {
		return err
	}
	rdr, err := flight.NewRecordReader(stream)
	if err != nil {
		return err
	}
	defer rdr.Release()
	for rdr.Next() {
	}
	return rdr.Err()
}

func listAll(ctx context.Context, c flight.Client, criteria string) error {
	stream, err := c.ListFlights(ctx, &flight.Criteria{Expression: []byte(criteria)})
	if err != nil {
		return err
	}
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func actRaw(ctx context.Context, c flight.Client, typ string, body []byte) error {
	stream, err := c.DoAction(ctx, &flight.Action{Type: typ, Body: body})
	if err != nil {
		return err
	}
	for {
		_, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

func js(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func pathD(keys ...string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: keys}
}

func rawCmd(s string) *flight.FlightDescriptor {
	return &flight.FlightDescriptor{Type: flight.DescriptorCMD, Cmd: []byte(s)}
}

func sha(s string) string { return quivertest.TokenSHA256(s) }

// TestBadInput: a catalogue of hostile and malformed requests. Each must
// get its gRPC code, leave the data dir byte-for-byte as it was (hashed
// before and after), and show no server path in its message.
func TestBadInput(t *testing.T) {
	requireStress(t)
	tmp := t.TempDir()
	data := filepath.Join(tmp, "qv-secret-data")
	outside := filepath.Join(tmp, "qv-secret-outside")
	authFile := filepath.Join(tmp, "auth.json")
	if err := os.WriteFile(authFile, js(map[string]any{"tokens": []map[string]any{
		{"sha256": sha("admin-token"), "identity": "root", "role": "admin"},
		{"sha256": sha("reader-token"), "identity": "reader", "role": "read"},
		{"sha256": sha("other-writer"), "identity": "ow", "role": "write", "prefixes": []string{"other"}},
		{"sha256": sha("expired-token"), "identity": "old", "role": "admin", "expires": "2020-01-01T00:00:00Z"},
	}}), 0o600); err != nil {
		t.Fatal(err)
	}
	p := mustStart(t, data, "--auth-file", authFile, "--max-recv-msg-size", "8388608", "--max-put-bytes", "33554432", "--lock-timeout", "1s")
	cl := mustDial(t, p.addr)
	// The catalogue is hostile input: raw Flight calls (the Go client
	// would not send most of it). The setup and the check use the client.
	c := cl.Flight()
	base, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	with := func(tok string) context.Context {
		return metadata.AppendToOutgoingContext(base, "authorization", "Bearer "+tok)
	}
	ctx := with("admin-token")

	// The data dir: a profile with data, and an outside dir with a profile
	// that symlinks planted in the data dir point to.
	b := rowsBatch(0, 100, "base")
	defer b.Release()
	if _, err := put(ctx, cl, "sales/orders", client.PutOptions{Mode: catalog.ModeWrite, PartitionBy: []string{"client"}}, rowSchema, b); err != nil {
		t.Fatal(err)
	}
	if _, err := put(ctx, cl, "flat/x", client.PutOptions{}, rowSchema, b); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(outside, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", filepath.Join(data, "flat", "x"), filepath.Join(outside, "prof")).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	for link, target := range map[string]string{
		filepath.Join(data, "evil"):               outside,
		filepath.Join(data, "sales", "evil2"):     filepath.Join(outside, "prof"),
		filepath.Join(data, "flat", "x", "vlink"): filepath.Join(outside, "prof", "v0"),
	} {
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}

	long := strings.Repeat("a", 300)
	deep := strings.Repeat("d/", 3000) + "x"
	bad := []string{"..", "../qv-secret-outside/prof", "sales/../../qv-secret-outside/prof", "/etc", "/tmp/x", "evil", "evil/prof",
		"sales/evil2", "a\x00b", long, "a\\b", ".hidden/x", "a=b/c", "", "flat/x/vlink", deep}
	type tc struct {
		name string
		want codes.Code
		do   func() error
	}
	var cases []tc
	add := func(name string, want codes.Code, do func() error) { cases = append(cases, tc{name, want, do}) }
	IA, NF := codes.InvalidArgument, codes.NotFound

	// Keys in every field that carries one.
	for _, k := range bad {
		k := k
		want := IA
		if k == "flat/x/vlink" {
			want = IA // inside a profile: nested
		}
		add(fmt.Sprintf("DoGet bare ticket %q", trim(k, 40)), want, func() error { return getAll(ctx, c, []byte(k)) })
	}
	add("DoGet bare ticket %2e%2e (not decoded: no such profile)", NF, func() error { return getAll(ctx, c, []byte("%2e%2e/%2e%2e/etc")) })
	add("DoGet bare ticket %2e%2e/qv-secret-outside/prof", NF, func() error { return getAll(ctx, c, []byte("%2e%2e/qv-secret-outside/prof")) })
	for _, k := range []string{"..", "/etc", "evil/prof", "a\x00b", long} {
		k := k
		add(fmt.Sprintf("DoGet JSON ticket path %q", trim(k, 40)), IA, func() error { return getAll(ctx, c, js(map[string]any{"path": k})) })
	}
	add("DoGet JSON ticket keys [.., x]", IA, func() error { return getAll(ctx, c, js(map[string]any{"keys": []string{"..", "x"}})) })
	add("DoGet JSON ticket keys [sales, .., .., qv-secret-outside]", IA, func() error {
		return getAll(ctx, c, js(map[string]any{"keys": []string{"sales", "..", "..", "qv-secret-outside", "prof"}}))
	})
	add("DoGet pinned file outside the version (matched against committed files only)", NF, func() error {
		return getAll(ctx, c, js(map[string]any{"path": "flat/x", "version": 0, "files": []string{"../../../qv-secret-outside/prof/v0/0.parquet"}}))
	})
	for _, k := range []string{"..", "/etc", "evil", "sales/evil2", long, "a\x00b"} {
		k := k
		add(fmt.Sprintf("DoPut PATH %q", trim(k, 40)), IA, func() error {
			_, err := quivertest.Put(ctx, c, pathD(strings.Split(k, "/")...), rowSchema, b)
			return err
		})
	}
	add("DoPut CMD path ../x", IA, func() error {
		_, err := quivertest.Put(ctx, c, cmdDesc(map[string]any{"path": "../x"}), rowSchema, b)
		return err
	})
	add("DoPut CMD path evil/new (inside a symlink out)", IA, func() error {
		_, err := quivertest.Put(ctx, c, cmdDesc(map[string]any{"path": "evil/new"}), rowSchema, b)
		return err
	})
	add("DoPut CMD keys [evil, new]", IA, func() error {
		_, err := quivertest.Put(ctx, c, cmdDesc(map[string]any{"keys": []string{"evil", "new"}}), rowSchema, b)
		return err
	})
	add("DoPut CMD keys [.., .., tmp]", IA, func() error {
		_, err := quivertest.Put(ctx, c, cmdDesc(map[string]any{"keys": []string{"..", "..", "tmp"}}), rowSchema, b)
		return err
	})
	add("DoPut CMD path flat/x/vlink/y (nested in a profile, via symlink)", IA, func() error {
		_, err := quivertest.Put(ctx, c, cmdDesc(map[string]any{"path": "flat/x/vlink/y"}), rowSchema, b)
		return err
	})
	add("DoPut CMD path sales (above a profile)", IA, func() error {
		_, err := quivertest.Put(ctx, c, cmdDesc(map[string]any{"path": "sales", "mode": "write"}), rowSchema, b)
		return err
	})
	add("GetFlightInfo PATH ..", IA, func() error { _, err := c.GetFlightInfo(ctx, pathD("..")); return err })
	add("GetFlightInfo PATH evil/prof", IA, func() error { _, err := c.GetFlightInfo(ctx, pathD("evil", "prof")); return err })
	add("GetSchema CMD path /etc", IA, func() error { _, err := c.GetSchema(ctx, rawCmd(`{"path":"/etc"}`)); return err })
	add("GetSchema PATH sales/evil2", IA, func() error { _, err := c.GetSchema(ctx, pathD("sales", "evil2")); return err })
	add("ListFlights criteria ..", IA, func() error { return listAll(ctx, c, "..") })
	add("ListFlights criteria evil", IA, func() error { return listAll(ctx, c, "evil") })
	add("ListFlights criteria /etc (lists nothing)", codes.OK, func() error { return listAll(ctx, c, "/etc") })
	add("list-versions path ..", IA, func() error { return actRaw(ctx, c, "list-versions", js(map[string]any{"path": ".."})) })
	add("verify prefix ../", IA, func() error { return actRaw(ctx, c, "verify", js(map[string]any{"prefix": "../"})) })
	add("verify path evil/prof", IA, func() error { return actRaw(ctx, c, "verify", js(map[string]any{"path": "evil/prof"})) })
	add("verify prefix evil", IA, func() error { return actRaw(ctx, c, "verify", js(map[string]any{"prefix": "evil"})) })
	add("lineage path /etc", IA, func() error { return actRaw(ctx, c, "lineage", js(map[string]any{"path": "/etc"})) })
	add("remove-old-versions path evil/prof", IA, func() error {
		return actRaw(ctx, c, "remove-old-versions", js(map[string]any{"path": "evil/prof", "keep": 1, "grace_s": 0}))
	})
	add("break-lock path ../../x", IA, func() error { return actRaw(ctx, c, "break-lock", js(map[string]any{"path": "../../x"})) })
	add("compact path sales/evil2", IA, func() error { return actRaw(ctx, c, "compact", js(map[string]any{"path": "sales/evil2"})) })
	add("compact keys [evil, prof]", IA, func() error { return actRaw(ctx, c, "compact", js(map[string]any{"keys": []string{"evil", "prof"}})) })

	// Malformed tickets.
	add("ticket {", IA, func() error { return getAll(ctx, c, []byte("{")) })
	add("ticket path is a number", IA, func() error { return getAll(ctx, c, []byte(`{"path":5}`)) })
	add("ticket version abc", IA, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","version":"abc"}`)) })
	add("ticket version -1", IA, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","version":-1}`)) })
	add("ticket version 99", NF, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","version":99}`)) })
	add("ticket version 1e300", IA, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","version":1e300}`)) })
	add("ticket unknown column", IA, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","columns":["nope"]}`)) })
	add("ticket columns not a list", IA, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","columns":"id"}`)) })
	add("ticket partition on a non-partition column", IA, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","partition":{"id":"1"}}`)) })
	add("ticket partition value ../.. (a filter value, never a path: no rows)", codes.OK, func() error {
		return getAll(ctx, c, []byte(`{"path":"sales/orders","partition":{"client":"../../../qv-secret-outside"}}`))
	})
	add("ticket unknown field", IA, func() error { return getAll(ctx, c, []byte(`{"path":"flat/x","x":1}`)) })
	add("ticket empty", IA, func() error { return getAll(ctx, c, nil) })
	add("ticket 1 MiB of garbage", IA, func() error { return getAll(ctx, c, []byte("{"+strings.Repeat("\xff", 1<<20))) })
	add("ticket invalid UTF-8 bare path", IA, func() error { return getAll(ctx, c, []byte("sales/\xff\xfe")) })

	// Malformed descriptors.
	put1 := func(d *flight.FlightDescriptor) func() error {
		return func() error { _, err := quivertest.Put(ctx, c, d, rowSchema, b); return err }
	}
	add("CMD {", IA, put1(rawCmd("{")))
	add("CMD mode delete", IA, put1(rawCmd(`{"path":"flat/x","mode":"delete"}`)))
	add("CMD unknown field", IA, put1(rawCmd(`{"path":"flat/x","overwrite":true}`)))
	add("CMD both path and keys", IA, put1(rawCmd(`{"path":"flat/x","keys":["flat","x"]}`)))
	add("CMD partition_by with append", IA, put1(rawCmd(`{"path":"flat/x","partition_by":["client"]}`)))
	add("CMD partition_by unknown column", IA, put1(rawCmd(`{"path":"new/p","mode":"write","partition_by":["nope"]}`)))
	add("CMD request_id of 1000 bytes", IA, put1(cmdDesc(map[string]any{"path": "flat/x", "request_id": strings.Repeat("r", 1000)})))
	add("CMD metadata is an array", IA, put1(rawCmd(`{"path":"flat/x","metadata":[1,2]}`)))
	add("CMD format xlsx", IA, put1(rawCmd(`{"path":"new/q","format":"xlsx"}`)))
	add("CMD csv append to a parquet profile", codes.FailedPrecondition, put1(rawCmd(`{"path":"flat/x","format":"csv"}`)))
	add("PATH descriptor with no components", IA, put1(pathD()))
	add("DoPut without a descriptor", IA, func() error { return putRaw(ctx, c, encode(nil, rowSchema, b)) })
	add("descriptor type UNKNOWN", IA, put1(&flight.FlightDescriptor{Type: flight.DescriptorUNKNOWN, Cmd: []byte("flat/x")}))

	// Malformed action bodies.
	add("unknown action", codes.Unimplemented, func() error { return actRaw(ctx, c, "drop-table", []byte(`{}`)) })
	add("action body not JSON", IA, func() error { return actRaw(ctx, c, "list-versions", []byte("flat/x")) })
	add("action body a JSON array", IA, func() error { return actRaw(ctx, c, "verify", []byte(`["flat/x"]`)) })
	add("remove-old-versions keep 0", IA, func() error { return actRaw(ctx, c, "remove-old-versions", []byte(`{"path":"flat/x","keep":0}`)) })
	add("remove-old-versions keep -1", IA, func() error { return actRaw(ctx, c, "remove-old-versions", []byte(`{"path":"flat/x","keep":-1}`)) })
	add("remove-old-versions grace_s -5", IA, func() error {
		return actRaw(ctx, c, "remove-old-versions", []byte(`{"path":"flat/x","keep":1,"grace_s":-5}`))
	})
	add("sweep older_than_s a string", IA, func() error { return actRaw(ctx, c, "sweep", []byte(`{"older_than_s":"0"}`)) })
	add("sweep with a path field", IA, func() error { return actRaw(ctx, c, "sweep", []byte(`{"path":"flat/x","older_than_s":0}`)) })
	add("break-lock without path", IA, func() error { return actRaw(ctx, c, "break-lock", []byte(`{}`)) })

	// Streams: schema changes, wrong types, corrupt IPC, sizes.
	other := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.BinaryTypes.String}}, nil)
	ob := array.NewRecordBuilder(memory.DefaultAllocator, other)
	ob.Field(0).(*array.StringBuilder).AppendValues([]string{"x", "y"}, nil)
	strRec := ob.NewRecordBatch()
	ob.Release()
	defer strRec.Release()
	fdesc := cmdDesc(map[string]any{"path": "flat/x"})
	add("schema change mid-stream (second schema message)", IA, func() error {
		m := append(encode(fdesc, rowSchema, b), encode(nil, other, strRec)...)
		return putRaw(ctx, c, m)
	})
	add("wrong type: id as string", IA, func() error { _, err := quivertest.Put(ctx, c, fdesc, other, strRec); return err })
	add("wrong type in a write to a partitioned profile's partition column", IA, func() error {
		_, err := quivertest.Put(ctx, c, cmdDesc(map[string]any{"path": "sales/orders"}), other, strRec)
		return err
	})
	extra := arrow.NewSchema(append(rowSchema.Fields(), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int8}), nil)
	eb := array.NewRecordBuilder(memory.DefaultAllocator, extra)
	eb.Field(0).(*array.Int64Builder).Append(1)
	eb.Field(1).(*array.StringBuilder).Append("x")
	eb.Field(2).(*array.Float64Builder).Append(1)
	eb.Field(3).(*array.Int8Builder).Append(1)
	extraRec := eb.NewRecordBatch()
	eb.Release()
	defer extraRec.Release()
	add("extra column", IA, func() error { _, err := quivertest.Put(ctx, c, fdesc, extra, extraRec); return err })
	add("missing column", IA, func() error {
		r := array.NewRecordBatch(arrow.NewSchema(rowSchema.Fields()[:2], nil), b.Columns()[:2], b.NumRows())
		defer r.Release()
		_, err := quivertest.Put(ctx, c, fdesc, r.Schema(), r)
		return err
	})
	good := encode(fdesc, rowSchema, b)
	add("corrupt IPC: garbage schema header", IA, func() error {
		m := []*flight.FlightData{{FlightDescriptor: fdesc, DataHeader: []byte("\x10\x00\x00\x00garbage-header!!")}}
		return putRaw(ctx, c, m)
	})
	add("corrupt IPC: garbage batch header", IA, func() error {
		m := []*flight.FlightData{good[0], {DataHeader: []byte("\xff\xff\xff\xffnot flatbuffers"), DataBody: good[1].DataBody}}
		return putRaw(ctx, c, m)
	})
	add("corrupt IPC: batch body truncated", IA, func() error {
		m := []*flight.FlightData{good[0], {DataHeader: good[1].DataHeader, DataBody: good[1].DataBody[:len(good[1].DataBody)/3]}}
		return putRaw(ctx, c, m)
	})
	add("corrupt IPC: batch header bytes flipped", IA, func() error {
		h := append([]byte(nil), good[1].DataHeader...)
		for i := 8; i < len(h); i += 7 {
			h[i] ^= 0xA5
		}
		m := []*flight.FlightData{good[0], {DataHeader: h, DataBody: good[1].DataBody}}
		return putRaw(ctx, c, m)
	})
	add("corrupt IPC: batch before any schema", IA, func() error {
		m := []*flight.FlightData{{FlightDescriptor: fdesc, DataHeader: good[1].DataHeader, DataBody: good[1].DataBody}}
		return putRaw(ctx, c, m)
	})
	add("empty DoPut stream", IA, func() error { return putRaw(ctx, c, nil) })
	add("enormous batch (16 MiB message > --max-recv-msg-size 8 MiB)", codes.ResourceExhausted, func() error {
		r := randomBatch(1<<40, 1<<20)
		defer r.Release()
		_, err := quivertest.Put(ctx, c, fdesc, rowSchema, r)
		return err
	})
	add("put over --max-put-bytes (6 × 6 MiB batches)", codes.ResourceExhausted, func() error {
		r := randomBatch(1<<41, 380_000)
		defer r.Release()
		_, err := quivertest.Put(ctx, c, fdesc, rowSchema, r, r, r, r, r, r)
		return err
	})
	add(fmt.Sprintf("%d tiny batches, then a schema change", sc.TinyBatches), IA, func() error {
		stream, err := c.DoPut(ctx)
		if err != nil {
			return err
		}
		w := flight.NewRecordWriter(stream, ipc.WithSchema(rowSchema))
		w.SetFlightDescriptor(fdesc)
		tiny := rowsBatch(1<<42, 1, "tiny")
		defer tiny.Release()
		for i := 0; i < sc.TinyBatches; i++ {
			if err := w.Write(tiny); err != nil {
				break
			}
		}
		_ = w.Close()
		for _, m := range encode(nil, other, strRec) {
			if stream.Send(m) != nil {
				break
			}
		}
		_ = stream.CloseSend()
		for {
			if _, err := stream.Recv(); err != nil {
				if errors.Is(err, io.EOF) {
					return nil
				}
				return err
			}
		}
	})

	// Authentication and authorization.
	add("no credentials", codes.Unauthenticated, func() error { return getAll(base, c, []byte("flat/x")) })
	add("unknown bearer token", codes.Unauthenticated, func() error { return getAll(with("nope"), c, []byte("flat/x")) })
	add("expired token DoPut", codes.Unauthenticated, func() error { _, err := quivertest.Put(with("expired-token"), c, fdesc, rowSchema, b); return err })
	add("malformed authorization header", codes.Unauthenticated, func() error {
		return getAll(metadata.AppendToOutgoingContext(base, "authorization", "Bearer"), c, []byte("flat/x"))
	})
	add("reader DoPut", codes.PermissionDenied, func() error { _, err := quivertest.Put(with("reader-token"), c, fdesc, rowSchema, b); return err })
	add("reader sweep", codes.PermissionDenied, func() error { return actRaw(with("reader-token"), c, "sweep", []byte(`{"older_than_s":0}`)) })
	add("reader compact", codes.PermissionDenied, func() error { return actRaw(with("reader-token"), c, "compact", js(map[string]any{"path": "flat/x"})) })
	add("writer limited to other/ puts to flat/x", codes.PermissionDenied, func() error { _, err := quivertest.Put(with("other-writer"), c, fdesc, rowSchema, b); return err })
	add("writer limited to other/ puts to other/../flat/x", IA, func() error {
		_, err := quivertest.Put(with("other-writer"), c, cmdDesc(map[string]any{"path": "other/../flat/x"}), rowSchema, b)
		return err
	})

	secrets := []string{data, outside, tmp, "qv-secret-data"} // requests name qv-secret-outside themselves
	var mismatches, changed, leaked int
	byCode := counter{}
	for _, tc := range cases {
		before, namesBefore := hashTree(t, data)
		err := tc.do()
		after, namesAfter := hashTree(t, data)
		got := status.Code(err)
		byCode.inc(got.String())
		msg := ""
		if err != nil {
			msg = err.Error()
		}
		ok := true
		if got != tc.want {
			mismatches++
			ok = false
			t.Errorf("%s: got %s, want %s (%s)", tc.name, got, tc.want, trim(msg, 300))
		}
		if before != after {
			changed++
			ok = false
			t.Errorf("%s: data dir changed: %s", tc.name, trim(diffNames(namesBefore, namesAfter), 500))
		}
		for _, s := range secrets {
			if strings.Contains(msg, s) {
				leaked++
				ok = false
				t.Errorf("%s: message shows a server path: %s", tc.name, trim(msg, 300))
				break
			}
		}
		if ok {
			t.Logf("ok %-60s %s: %s", trim(tc.name, 60), got, trim(msg, 160))
		}
	}
	// The server still works and the data is intact.
	if err := getAll(ctx, c, []byte("flat/x")); err != nil {
		t.Errorf("read after the catalogue: %v", err)
	}
	// Verify finds only the symbolic link the catalogue planted inside the
	// profile (reported, never followed).
	vr, err := verify(ctx, cl, map[string]any{"prefix": "flat"})
	if err != nil {
		t.Errorf("verify after the catalogue: %v", err)
	} else {
		for _, p := range vr.Problems {
			if p.Kind != "link" || p.Path != "flat/x/vlink" {
				t.Errorf("verify after the catalogue: %+v", p)
			}
		}
	}
	report(t, "hostile/malformed requests=%d: wrong code=%d, data dir changed=%d, server path in message=%d; codes: %s",
		len(cases), mismatches, changed, leaked, byCode.String())
}
