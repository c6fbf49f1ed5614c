package ipcdict

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
)

// Writer is an IPC stream writer over a payload writer that sends float
// dictionaries bit for bit (see the package comment).
type Writer struct {
	pw     *skipper
	schema *arrow.Schema
	opts   []ipc.Option
	w      *ipc.Writer
	floats bool
	// sent holds the float dictionaries of the last batch written (nil:
	// none yet), retained.
	sent []arrow.ArrayData
	err  error
}

// NewWriter returns a writer of batches of schema whose payloads go to pw:
// the schema first (unless schemaSent: the caller has sent it already),
// then each batch's dictionaries and the batch. opts are the ipc.Writer's
// options (WithSchema is added). pw.Close is called once, by Close.
func NewWriter(pw ipc.PayloadWriter, schema *arrow.Schema, schemaSent bool, opts ...ipc.Option) *Writer {
	sk := &skipper{pw: pw}
	if schemaSent {
		sk.skip = 1
	}
	opts = append(slices.Clone(opts), ipc.WithSchema(schema))
	return &Writer{pw: sk, schema: schema, opts: opts, w: ipc.NewWriterWithPayloadWriter(sk, opts...), floats: HasFloat(schema)}
}

// Write writes rec (of the writer's schema).
func (w *Writer) Write(rec arrow.RecordBatch) error {
	if w.err != nil {
		return w.err
	}
	if w.floats {
		cur := Floats(rec)
		if w.sent != nil && !SameFloats(w.sent, cur) {
			// A new writer: its dictionaries start empty, so it sends
			// every one of this batch's; its schema message is dropped.
			if err := w.w.Close(); err != nil {
				w.err = err
				return err
			}
			w.pw.skip = 1
			w.w = ipc.NewWriterWithPayloadWriter(w.pw, w.opts...)
		}
		w.keep(cur)
	}
	if err := w.w.Write(rec); err != nil {
		w.err = err
		return err
	}
	return nil
}

// keep retains cur as the dictionaries last sent, releasing the earlier.
func (w *Writer) keep(cur []arrow.ArrayData) {
	release(w.sent)
	if cur == nil {
		cur = []arrow.ArrayData{}
	}
	for _, d := range cur {
		if d != nil {
			d.Retain()
		}
	}
	w.sent = cur
}

// Close ends the stream (the schema is sent if no batch was) and closes the
// payload writer.
func (w *Writer) Close() error {
	release(w.sent)
	w.sent = nil
	if w.w == nil {
		return nil
	}
	w.pw.last = true
	err := w.w.Close()
	w.w = nil
	return err
}

func release(ds []arrow.ArrayData) {
	for _, d := range ds {
		if d != nil {
			d.Release()
		}
	}
}

// skipper passes payloads on to pw, dropping the next skip of them (a
// replacement writer's schema), and closes pw only at the stream's end.
type skipper struct {
	pw   ipc.PayloadWriter
	skip int
	// last: the writer being closed is the stream's last.
	last    bool
	started bool
}

func (s *skipper) Start() error {
	if s.started {
		return nil
	}
	s.started = true
	return s.pw.Start()
}

func (s *skipper) WritePayload(p ipc.Payload) error {
	if s.skip > 0 {
		s.skip--
		return nil
	}
	return s.pw.WritePayload(p)
}

func (s *skipper) Close() error {
	if !s.last {
		return nil
	}
	return s.pw.Close()
}

// HasFloat reports whether sc has a dictionary of floats (float16,
// float32, float64) anywhere.
func HasFloat(sc *arrow.Schema) bool {
	return slices.ContainsFunc(sc.Fields(), func(f arrow.Field) bool {
		return typeHas(f.Type, func(t *arrow.DictionaryType) bool { return IsFloat(t.ValueType) })
	})
}

// typeHas reports whether dt is or holds, at any depth, a dictionary type
// for which pred is true.
func typeHas(dt arrow.DataType, pred func(*arrow.DictionaryType) bool) bool {
	switch t := dt.(type) {
	case *arrow.DictionaryType:
		return pred(t)
	case arrow.NestedType:
		return slices.ContainsFunc(t.Fields(), func(f arrow.Field) bool { return typeHas(f.Type, pred) })
	}
	return false
}

// walkDicts calls fn with the type and the dictionary (nil: none) of every
// dictionary in d, at any depth, in an order that is the same for every
// array of d's type.
func walkDicts(d arrow.ArrayData, fn func(t *arrow.DictionaryType, dict arrow.ArrayData)) {
	if t, ok := d.DataType().(*arrow.DictionaryType); ok {
		dict := d.Dictionary()
		if ad, ok := dict.(*array.Data); ok && ad == nil {
			dict = nil // a nil *Data in a non-nil interface
		}
		fn(t, dict)
		return
	}
	for _, c := range d.Children() {
		walkDicts(c, fn)
	}
}

// IsFloat reports whether dt is float16, float32 or float64.
func IsFloat(dt arrow.DataType) bool {
	switch dt.ID() {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return true
	}
	return false
}

// Floats returns the dictionaries (nil: none) of every dictionary of
// floats in rec, at any depth, in a fixed order; they are not retained.
func Floats(rec arrow.RecordBatch) []arrow.ArrayData {
	var out []arrow.ArrayData
	for _, c := range rec.Columns() {
		walkDicts(c.Data(), func(t *arrow.DictionaryType, dict arrow.ArrayData) {
			if IsFloat(t.ValueType) {
				out = append(out, dict)
			}
		})
	}
	return out
}

// SameFloats reports whether two lists of Floats hold the same values bit
// for bit (0.0 is not -0.0; a NaN is the same as a NaN of the same payload
// only).
func SameFloats(a, b []arrow.ArrayData) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !SameFloatBits(a[i], b[i], true) {
			return false
		}
	}
	return true
}

// SameFloatBits reports whether two dictionaries of floats hold the same
// values bit for bit (nil: no values), and, unless nanOK, none of them NaN.
func SameFloatBits(a, b arrow.ArrayData, nanOK bool) bool {
	if a == b && nanOK {
		return true
	}
	la, lb := 0, 0
	if a != nil {
		la = a.Len()
	}
	if b != nil {
		lb = b.Len()
	}
	if la != lb || (la > 0 && !arrow.TypeEqual(a.DataType(), b.DataType())) {
		return false
	}
	if la == 0 {
		return true
	}
	x, y := array.MakeFromData(a), array.MakeFromData(b)
	defer x.Release()
	defer y.Release()
	for i := range la {
		if x.IsNull(i) != y.IsNull(i) {
			return false
		}
		if x.IsNull(i) {
			continue
		}
		var u, v uint64
		var nan bool
		switch xa := x.(type) {
		case *array.Float64:
			u, v = math.Float64bits(xa.Value(i)), math.Float64bits(y.(*array.Float64).Value(i))
			nan = math.IsNaN(xa.Value(i))
		case *array.Float32:
			u, v = uint64(math.Float32bits(xa.Value(i))), uint64(math.Float32bits(y.(*array.Float32).Value(i)))
			nan = xa.Value(i) != xa.Value(i)
		case *array.Float16:
			u, v = uint64(xa.Value(i).Uint16()), uint64(y.(*array.Float16).Value(i).Uint16())
			nan = xa.Value(i).IsNaN()
		default:
			return false
		}
		if (nan && !nanOK) || u != v {
			return false
		}
	}
	return true
}

// ErrReplaced is returned by a FileGuard when a column's dictionary
// changes between batches.
var ErrReplaced = errors.New("its dictionary changes between batches, and the Arrow IPC file format holds one dictionary per column")

// FileGuard checks the batches given to an IPC file writer, which holds
// one dictionary per field: arrow-go's file writer refuses a changed
// dictionary with an error naming no column, and takes a float dictionary
// within 1e-5 of the first for the same one (writing nothing, so the file
// would read back other values). The guard refuses both first, naming the
// column.
type FileGuard struct {
	schema *arrow.Schema
	// first holds, per top-level column, the dictionaries (at any depth)
	// of the first batch, retained; nil until the first batch.
	first [][]arrow.ArrayData
	on    bool
}

// NewFileGuard returns a guard for a file of schema.
func NewFileGuard(schema *arrow.Schema) *FileGuard {
	on := slices.ContainsFunc(schema.Fields(), func(f arrow.Field) bool {
		return typeHas(f.Type, func(*arrow.DictionaryType) bool { return true })
	})
	return &FileGuard{schema: schema, on: on}
}

// Check returns an error wrapping ErrReplaced, naming the column, when one
// of rec's dictionaries is not that of the first batch checked (floats
// compared bit for bit).
func (g *FileGuard) Check(rec arrow.RecordBatch) error {
	if !g.on {
		return nil
	}
	first := g.first == nil
	if first {
		g.first = make([][]arrow.ArrayData, rec.NumCols())
	}
	for i, c := range rec.Columns() {
		var cur []arrow.ArrayData
		walkDicts(c.Data(), func(_ *arrow.DictionaryType, dict arrow.ArrayData) { cur = append(cur, dict) })
		if first {
			for _, d := range cur {
				if d != nil {
					d.Retain()
				}
			}
			g.first[i] = cur
			continue
		}
		for k, d := range cur {
			if !sameDict(g.first[i][k], d) {
				return fmt.Errorf("column %q: %w", g.schema.Field(i).Name, ErrReplaced)
			}
		}
	}
	return nil
}

// sameDict reports whether two dictionaries hold the same values: bit for
// bit for floats, by value for the others (nil: no values).
func sameDict(a, b arrow.ArrayData) bool {
	if a == b {
		return true
	}
	if (a != nil && IsFloat(a.DataType())) || (b != nil && IsFloat(b.DataType())) {
		return SameFloatBits(a, b, true)
	}
	la, lb := 0, 0
	if a != nil {
		la = a.Len()
	}
	if b != nil {
		lb = b.Len()
	}
	if la == 0 || lb == 0 {
		return la == lb
	}
	x, y := array.MakeFromData(a), array.MakeFromData(b)
	defer x.Release()
	defer y.Release()
	return array.Equal(x, y)
}

// Release releases the dictionaries the guard holds.
func (g *FileGuard) Release() {
	for _, ds := range g.first {
		release(ds)
	}
	g.first = nil
}
