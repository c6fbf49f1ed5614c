package codec

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/parquet/metadata"
	flatbuffers "github.com/google/flatbuffers/go"
)

// arrowSchemaKey is the footer key under which Arrow writers store the
// Arrow schema (an IPC schema message, base64).
const arrowSchemaKey = "ARROW:schema"

// checkStoredSchema checks the framing of the Arrow schema a Parquet
// footer carries before pqarrow parses it: the IPC reader allocates the
// message's metadata and body by the lengths the message claims, so a
// file whose footer claims a 32 GiB body made it allocate 32 GiB. The
// lengths must fit in what the footer holds, and so must every vector
// of the schema (CheckSchemaMessage).
func checkStoredSchema(kv metadata.KeyValueMetadata) (err error) {
	v := kv.FindValue(arrowSchemaKey)
	if v == nil {
		return nil
	}
	var b []byte
	if len(*v)%4 == 0 {
		b, err = base64.StdEncoding.DecodeString(*v)
	}
	if len(b) == 0 || err != nil {
		if b, err = base64.RawStdEncoding.DecodeString(*v); err != nil {
			return nil // pqarrow refuses it the same way
		}
	}
	bad := errors.New("the footer's Arrow schema claims more bytes than it holds")
	defer func() {
		if recover() != nil {
			err = bad
		}
	}()
	if len(b) < 4 {
		return nil
	}
	n := binary.LittleEndian.Uint32(b)
	b = b[4:]
	if n == 0xFFFFFFFF {
		if len(b) < 4 {
			return bad
		}
		n = binary.LittleEndian.Uint32(b)
		b = b[4:]
	}
	if int32(n) <= 0 {
		return nil // an end-of-stream or a bad length: the IPC reader refuses it without allocating
	}
	if uint64(n) > uint64(len(b)) {
		return fmt.Errorf("%w (a %d-byte header in %d)", bad, n, len(b))
	}
	hdr, body := b[:n], b[n:]
	if len(hdr) < 4 {
		return bad
	}
	msg := flatbuffers.Table{Bytes: hdr, Pos: flatbuffers.GetUOffsetT(hdr)}
	const fbMessageBodyLength = 10 // Message.bodyLength (format/Message.fbs)
	if o := flatbuffers.UOffsetT(msg.Offset(fbMessageBodyLength)); o != 0 {
		if bl := msg.GetInt64(o + msg.Pos); bl < 0 || uint64(bl) > uint64(len(body)) {
			return fmt.Errorf("%w (a %d-byte body in %d)", bad, bl, len(body))
		}
	}
	if err := CheckSchemaMessage(hdr, storedMaxColumns, storedMaxDepth); err != nil {
		return fmt.Errorf("the footer's Arrow schema: %w", err)
	}
	return nil
}

// Bounds of the Arrow schema a Parquet footer stores: far above what the
// server accepts in a put (the files may come from other writers), there
// to bound the work of checking it.
const (
	storedMaxColumns = 1 << 20
	storedMaxDepth   = 1 << 10
)
