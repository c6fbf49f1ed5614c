package flightserver

import (
	"github.com/apache/arrow-go/v18/arrow"
	flatbuffers "github.com/google/flatbuffers/go"
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

// fbTable reads the IPC flatbuffers with the flatbuffers library's own
// offset arithmetic (32-bit, wrapping), exactly as arrow-go's generated code
// does, so the check sees what the IPC reader will see. Out-of-range reads
// panic in the library; checkSchemaMessage recovers them as a malformed
// message.
type fbTable struct{ flatbuffers.Table }

// vector is the start and length of a vector field of elements of size
// bytes (0, 0 when absent), or ok=false when the claimed length does not
// fit in the buffer: arrow-go allocates by that length before it reads an
// element.
func (t fbTable) vector(voff flatbuffers.VOffsetT, size int) (start flatbuffers.UOffsetT, n int, ok bool) {
	o := flatbuffers.UOffsetT(t.Offset(voff))
	if o == 0 {
		return 0, 0, true
	}
	start, n = t.Vector(o), t.VectorLen(o)
	if n < 0 || int(start) > len(t.Bytes) || n > (len(t.Bytes)-int(start))/size {
		return 0, 0, false
	}
	return start, n, true
}

// table is the table a vector element of tables points to.
func (t fbTable) table(start flatbuffers.UOffsetT, i int) fbTable {
	return fbTable{flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(start + flatbuffers.UOffsetT(i)*4)}}
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
func (s *Server) checkSchemaMessage(hdr []byte) (err error) {
	malformed := status.Error(codes.InvalidArgument, "malformed IPC message header")
	defer func() {
		if recover() != nil {
			err = malformed
		}
	}()
	if len(hdr) < 4 {
		return malformed
	}
	msg := fbTable{flatbuffers.Table{Bytes: hdr, Pos: flatbuffers.GetUOffsetT(hdr)}}
	if _, _, ok := msg.vector(fbMessageCustomMetadata, 4); !ok {
		return malformed
	}
	o := flatbuffers.UOffsetT(msg.Offset(fbMessageHeaderType))
	if o == 0 || msg.GetByte(o+msg.Pos) != fbHeaderSchema {
		return nil // not a schema: the IPC reader judges it
	}
	o = flatbuffers.UOffsetT(msg.Offset(fbMessageHeader))
	if o == 0 {
		return malformed
	}
	var schema fbTable
	msg.Union(&schema.Table, o)
	start, n, ok := schema.vector(fbSchemaFields, 4)
	if !ok {
		return malformed
	}
	if _, _, ok := schema.vector(fbSchemaCustomMetadata, 4); !ok {
		return malformed
	}
	if _, _, ok := schema.vector(fbSchemaFeatures, 8); !ok {
		return malformed
	}
	type frame struct {
		parent fbTable
		start  flatbuffers.UOffsetT
		n, i   int
		depth  int
	}
	stack := []frame{{parent: schema, start: start, n: n, depth: 1}}
	leaves := 0
	for len(stack) > 0 {
		f := &stack[len(stack)-1]
		if f.i == f.n {
			stack = stack[:len(stack)-1]
			continue
		}
		field := f.parent.table(f.start, f.i)
		f.i++
		depth := f.depth
		if depth > s.opts.maxDepth {
			return s.depthError()
		}
		cs, cn, ok := field.vector(fbFieldChildren, 4)
		if !ok {
			return malformed
		}
		if _, _, ok := field.vector(fbFieldCustomMetadata, 4); !ok {
			return malformed
		}
		if cn == 0 {
			leaves++
			if leaves > s.opts.maxColumns {
				return s.columnsError()
			}
			continue
		}
		stack = append(stack, frame{parent: field, start: cs, n: cn, depth: depth + 1})
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
