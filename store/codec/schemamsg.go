package codec

import (
	"errors"

	flatbuffers "github.com/google/flatbuffers/go"
)

// Errors of CheckSchemaMessage.
var (
	// ErrMalformedMessage: the IPC message's flatbuffers do not hold
	// together (a vector longer than the message, a bad offset).
	ErrMalformedMessage = errors.New("malformed IPC message header")
	// ErrTooManyColumns: the schema has more leaf fields than allowed.
	ErrTooManyColumns = errors.New("the schema has too many leaf columns")
	// ErrTooDeep: the schema nests deeper than allowed.
	ErrTooDeep = errors.New("the schema nests too deep")
)

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
// panic in the library; CheckSchemaMessage recovers them as a malformed
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

// messageTable is the Message table at the root of an IPC message's
// flatbuffer header (ok=false when it is too short to hold one).
func messageTable(hdr []byte) (fbTable, bool) {
	if len(hdr) < 4 {
		return fbTable{}, false
	}
	return fbTable{flatbuffers.Table{Bytes: hdr, Pos: flatbuffers.GetUOffsetT(hdr)}}, true
}

// table is the table a vector element of tables points to.
func (t fbTable) table(start flatbuffers.UOffsetT, i int) fbTable {
	return fbTable{flatbuffers.Table{Bytes: t.Bytes, Pos: t.Indirect(start + flatbuffers.UOffsetT(i)*4)}}
}

// CheckSchemaMessage walks the schema of an IPC message's flatbuffer
// header (the DataHeader of a FlightData, or the message of a schema that
// a Parquet footer stores) before anything parses it: the IPC reader
// builds Go objects about 6× the size of the schema message, so the count
// has to happen on the bytes. It stops at the first leaf or level over
// the limits (ErrTooManyColumns, ErrTooDeep); its work is bounded by them,
// not by the message.
//
// It also checks that every vector whose length the IPC reader allocates
// by (fields, children, custom metadata) fits in the message: arrow-go
// trusts those lengths, and a 2.5 KiB message claiming 2^30 metadata
// entries made it allocate 33 GB.
//
// A message that is not a schema passes; a malformed one is
// ErrMalformedMessage.
func CheckSchemaMessage(hdr []byte, maxColumns, maxDepth int) (err error) {
	malformed := ErrMalformedMessage
	defer func() {
		if recover() != nil {
			err = malformed
		}
	}()
	msg, ok := messageTable(hdr)
	if !ok {
		return malformed
	}
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
		if depth > maxDepth {
			return ErrTooDeep
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
			if leaves > maxColumns {
				return ErrTooManyColumns
			}
			continue
		}
		stack = append(stack, frame{parent: field, start: cs, n: cn, depth: depth + 1})
	}
	return nil
}
