package flightserver

import (
	"errors"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/quiverdb/quiver/store/codec"
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

// checkSchemaMessage is codec.CheckSchemaMessage with the server's limits,
// its errors as statuses: a malformed message is InvalidArgument, one over
// a limit ResourceExhausted naming the limit.
func (s *Server) checkSchemaMessage(hdr []byte) error {
	switch err := codec.CheckSchemaMessage(hdr, s.opts.maxColumns, s.opts.maxDepth); {
	case err == nil:
		return nil
	case errors.Is(err, codec.ErrTooDeep):
		return s.depthError()
	case errors.Is(err, codec.ErrTooManyColumns):
		return s.columnsError()
	default:
		return status.Error(codes.InvalidArgument, "malformed IPC message header")
	}
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
