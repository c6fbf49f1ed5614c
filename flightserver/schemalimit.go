package flightserver

import (
	"encoding/binary"

	"github.com/apache/arrow-go/v18/arrow"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Defaults of the schema limits of a DoPut; each has an Option.
const (
	// DefaultMaxColumns is the most leaf fields (columns after flattening
	// structs, lists and maps) a put's schema may have. Each leaf becomes
	// a Parquet column writer with its own buffers: 100 000 leaves made a
	// 9 MiB request cost 2.3 GB.
	DefaultMaxColumns = 10_000
	// DefaultMaxDepth is the deepest nesting a put's schema may have (a
	// top-level primitive column has depth 1, a struct of it depth 2).
	// Work on a type grows with the square of its depth (its string form,
	// its fingerprint): a struct nested 60 000 deep cost 35 s of CPU.
	DefaultMaxDepth = 64
)

// schemaLimitError is what a schema over a limit gets: ResourceExhausted,
// naming the limit and its flag.
func schemaLimitError(what string, limit int, flag string) error {
	return status.Errorf(codes.ResourceExhausted,
		"the put's schema has more than %d %s, the server's limit (%s); nothing was written", limit, what, flag)
}

func (s *Server) columnsError() error {
	return schemaLimitError("leaf columns", s.opts.maxColumns, "--max-columns")
}

func (s *Server) depthError() error {
	return schemaLimitError("levels of nesting", s.opts.maxDepth, "--max-depth")
}

// Offsets in the vtables of the IPC flatbuffers (format/Message.fbs,
// format/Schema.fbs).
const (
	fbMessageHeaderType     = 6  // Message.header_type
	fbMessageHeader         = 8  // Message.header
	fbMessageCustomMetadata = 12 // Message.custom_metadata
	fbSchemaFields          = 6  // Schema.fields
	fbSchemaCustomMetadata  = 8  // Schema.custom_metadata
	fbSchemaFeatures        = 10 // Schema.features
	fbFieldChildren         = 14 // Field.children
	fbFieldCustomMetadata   = 16 // Field.custom_metadata
	fbHeaderSchema          = 1  // MessageHeader.Schema
)

// fbuf reads a flatbuffer with every offset checked, so hostile bytes
// yield ok=false instead of a panic.
type fbuf []byte

func (b fbuf) u32(p int) (int, bool) {
	if p < 0 || p+4 > len(b) {
		return 0, false
	}
	return int(binary.LittleEndian.Uint32(b[p:])), true
}

func (b fbuf) u16(p int) (int, bool) {
	if p < 0 || p+2 > len(b) {
		return 0, false
	}
	return int(binary.LittleEndian.Uint16(b[p:])), true
}

// field is the position of a table's field value, or 0 when the field is
// absent.
func (b fbuf) field(table, voff int) (int, bool) {
	if table < 0 || table+4 > len(b) {
		return 0, false
	}
	vt := table - int(int32(binary.LittleEndian.Uint32(b[table:])))
	vtLen, ok := b.u16(vt)
	if !ok {
		return 0, false
	}
	if voff+2 > vtLen {
		return 0, true
	}
	off, ok := b.u16(vt + voff)
	if !ok {
		return 0, false
	}
	if off == 0 {
		return 0, true
	}
	return table + off, true
}

// indirect follows the offset stored at p.
func (b fbuf) indirect(p int) (int, bool) {
	o, ok := b.u32(p)
	return p + o, ok
}

// vector is the start and length of a table's vector field of 4-byte
// elements (0, 0 when absent).
func (b fbuf) vector(table, voff int) (start, n int, ok bool) {
	return b.vectorOf(table, voff, 4)
}

// vectorOf is vector for elements of size bytes.
func (b fbuf) vectorOf(table, voff, size int) (start, n int, ok bool) {
	p, ok := b.field(table, voff)
	if !ok || p == 0 {
		return 0, 0, ok
	}
	v, ok := b.indirect(p)
	if !ok {
		return 0, 0, false
	}
	n, ok = b.u32(v)
	if !ok || n > (len(b)-v-4)/size {
		return 0, 0, false
	}
	return v + 4, n, true
}

// checkSchemaMessage walks the schema of an IPC message's flatbuffer
// header (the DataHeader of a FlightData) before anything parses it: the
// IPC reader builds Go objects about 6× the size of the schema message,
// so the count has to happen on the bytes. It stops at the first leaf or
// level over the limits; its work is bounded by them, not by the message.
//
// It also checks that every vector whose length the IPC reader allocates
// by (fields, children, custom metadata) fits in the message: arrow-go
// trusts those lengths, and a 2.5 KiB message claiming 2^30 metadata
// entries made it allocate 33 GB.
//
// A message that is not a schema passes; a malformed one is
// InvalidArgument.
func (s *Server) checkSchemaMessage(hdr []byte) error {
	b := fbuf(hdr)
	malformed := status.Error(codes.InvalidArgument, "malformed IPC message header")
	root, ok := b.indirect(0)
	if !ok {
		return malformed
	}
	if _, _, ok := b.vector(root, fbMessageCustomMetadata); !ok {
		return malformed
	}
	p, ok := b.field(root, fbMessageHeaderType)
	if !ok {
		return malformed
	}
	if p == 0 || p >= len(b) || b[p] != fbHeaderSchema {
		return nil // not a schema: the IPC reader judges it
	}
	p, ok = b.field(root, fbMessageHeader)
	if !ok || p == 0 {
		return malformed
	}
	schema, ok := b.indirect(p)
	if !ok {
		return malformed
	}
	start, n, ok := b.vector(schema, fbSchemaFields)
	if !ok {
		return malformed
	}
	if _, _, ok := b.vector(schema, fbSchemaCustomMetadata); !ok {
		return malformed
	}
	if _, _, ok := b.vectorOf(schema, fbSchemaFeatures, 8); !ok {
		return malformed
	}
	type frame struct{ start, n, i, depth int }
	stack := []frame{{start: start, n: n, depth: 1}}
	leaves := 0
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.i == f.n {
			stack = stack[:len(stack)-1]
			continue
		}
		elem := f.start + 4*f.i
		f.i++
		depth := f.depth
		if depth > s.opts.maxDepth {
			return s.depthError()
		}
		field, ok := b.indirect(elem)
		if !ok {
			return malformed
		}
		cs, cn, ok := b.vector(field, fbFieldChildren)
		if !ok {
			return malformed
		}
		if _, _, ok := b.vector(field, fbFieldCustomMetadata); !ok {
			return malformed
		}
		if cn == 0 {
			leaves++
			if leaves > s.opts.maxColumns {
				return s.columnsError()
			}
			continue
		}
		stack = append(stack, frame{start: cs, n: cn, depth: depth + 1})
	}
	return nil
}

// checkSchema checks a parsed schema against the same limits, without
// ever formatting a type (its string form grows with the square of its
// depth).
func (s *Server) checkSchema(sc *arrow.Schema) error {
	leaves, depth := schemaShape(sc, s.opts.maxColumns, s.opts.maxDepth)
	switch {
	case depth > s.opts.maxDepth:
		return s.depthError()
	case leaves > s.opts.maxColumns:
		return s.columnsError()
	}
	return nil
}

// schemaShape counts a schema's leaf fields and its deepest nesting,
// stopping once either passes its cap (then the counts returned exceed the
// caps, which is all the caller needs).
func schemaShape(sc *arrow.Schema, maxLeaves, maxDepth int) (leaves, depth int) {
	type item struct {
		f     arrow.Field
		depth int
	}
	var stack []item
	for _, f := range sc.Fields() {
		stack = append(stack, item{f, 1})
	}
	for len(stack) > 0 {
		it := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		depth = max(depth, it.depth)
		if depth > maxDepth {
			return leaves, depth
		}
		children := childFields(it.f.Type)
		if len(children) == 0 {
			leaves++
			if leaves > maxLeaves {
				return leaves, depth
			}
			continue
		}
		for _, c := range children {
			stack = append(stack, item{c, it.depth + 1})
		}
	}
	return leaves, depth
}

// childFields are the child fields of a type as the IPC format lists them.
func childFields(t arrow.DataType) []arrow.Field {
	switch t := t.(type) {
	case *arrow.DictionaryType:
		return childFields(t.ValueType)
	case arrow.ExtensionType:
		return childFields(t.StorageType())
	case arrow.NestedType:
		return t.Fields()
	}
	return nil
}
