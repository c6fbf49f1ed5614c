package codec

import (
	"errors"
	"fmt"

	flatbuffers "github.com/google/flatbuffers/go"
)

// ErrBodyTooShort: an IPC batch message declares buffers (or a body
// length) past the end of the body it came with.
var ErrBodyTooShort = errors.New("the batch's buffers lie past the end of its body")

// Offsets in the vtables of the IPC flatbuffers of batches
// (format/Message.fbs).
const (
	fbMessageBodyLength      = 10 // Message.bodyLength
	fbRecordBatchBuffers     = 8  // RecordBatch.buffers
	fbDictionaryBatchData    = 6  // DictionaryBatch.data
	fbHeaderDictionaryBatch  = 2  // MessageHeader.DictionaryBatch
	fbHeaderRecordBatch      = 3  // MessageHeader.RecordBatch
	fbBufferSize             = 16 // struct Buffer { offset: long; length: long }
	fbBufferLengthFromOffset = 8
)

// CheckBatchBody checks that every buffer a record batch or dictionary
// batch message declares (and its declared body length) lies within the
// bodyLen bytes of body the message came with. arrow-go's IPC reader
// slices the body by the declared offsets and lengths without comparing
// them with its length: a slice past the length but within the capacity
// of the body's memory reads whatever lies there (the bytes after the body
// in the message it was decoded from: red team round 17's j02), and one
// past the capacity panics. A message of another kind passes; a malformed
// one is ErrMalformedMessage.
func CheckBatchBody(hdr []byte, bodyLen int) (err error) {
	defer func() {
		if recover() != nil {
			err = ErrMalformedMessage
		}
	}()
	msg, ok := messageTable(hdr)
	if !ok {
		return ErrMalformedMessage
	}
	o := flatbuffers.UOffsetT(msg.Offset(fbMessageHeaderType))
	if o == 0 {
		return nil
	}
	kind := msg.GetByte(o + msg.Pos)
	if kind != fbHeaderRecordBatch && kind != fbHeaderDictionaryBatch {
		return nil
	}
	if o := flatbuffers.UOffsetT(msg.Offset(fbMessageBodyLength)); o != 0 {
		if n := msg.GetInt64(o + msg.Pos); n < 0 || n > int64(bodyLen) {
			return fmt.Errorf("%w: it declares a body of %d bytes and came with %d", ErrBodyTooShort, n, bodyLen)
		}
	}
	o = flatbuffers.UOffsetT(msg.Offset(fbMessageHeader))
	if o == 0 {
		return ErrMalformedMessage
	}
	var batch fbTable
	msg.Union(&batch.Table, o)
	if kind == fbHeaderDictionaryBatch {
		o := flatbuffers.UOffsetT(batch.Offset(fbDictionaryBatchData))
		if o == 0 {
			return nil // no data: the IPC reader refuses it
		}
		batch.Table = flatbuffers.Table{Bytes: hdr, Pos: batch.Indirect(o + batch.Pos)}
	}
	start, n, ok := batch.vector(fbRecordBatchBuffers, fbBufferSize)
	if !ok {
		return ErrMalformedMessage
	}
	for i := range n {
		at := start + flatbuffers.UOffsetT(i*fbBufferSize)
		off, size := batch.GetInt64(at), batch.GetInt64(at+fbBufferLengthFromOffset)
		if off < 0 || size < 0 || off > int64(bodyLen) || size > int64(bodyLen)-off {
			return fmt.Errorf("%w: buffer %d (offset %d, %d bytes) in a body of %d", ErrBodyTooShort, i, off, size, bodyLen)
		}
	}
	return nil
}
