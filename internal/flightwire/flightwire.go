package flightwire

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protobuf "google.golang.org/protobuf/proto"
)

// AliasMin is the smallest FlightData message worth decoding by aliasing
// (Unmarshal over a buffer of its own): it is grpc-go's largest pooled
// buffer tier below 1 MiB. grpc-go's proto codec gathers a received
// message into a buffer from mem.DefaultBufferPool, whose tiers are
// 32 KiB and then 1 MiB, zeroes the whole of it, and protobuf then copies
// the body out of it: a 40 KiB message cost a 1 MiB clear and a copy.
const AliasMin = 32 << 10

// pooledMin is the size from which Codec leaves a message to grpc-go's
// codec again: from 1 MiB on, grpc-go's pooled buffer is about the
// message's size, and zeroing it costs what allocating it would.
const pooledMin = 1 << 20

// Codec is grpc-go's proto codec, except for two sizes of message where
// it spends more than the message is worth:
//   - a message to send of 32 KiB to 1 MiB (a small put's batch) is
//     marshalled into a pooled buffer that is not zeroed first (marshalPool),
//     where grpc-go's codec takes a pooled buffer of 1 MiB and zeroes all of
//     it (a fifth of a Go client's CPU under 32 concurrent 1,000-row puts);
//   - a received FlightData of AliasMin or more (a batch) is decoded by
//     Unmarshal over one buffer of its own, its header and body aliasing
//     it, where grpc-go's codec gathers it into a zeroed pooled buffer and
//     protobuf then copies the body out of it.
type Codec struct{ encoding.CodecV2 }

// NewCodec returns a Codec over the registered proto codec.
func NewCodec() Codec { return Codec{encoding.GetCodecV2(proto.Name)} }

// Marshal implements encoding.CodecV2.
func (c Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(protobuf.Message)
	if !ok {
		return c.CodecV2.Marshal(v)
	}
	n := protobuf.Size(m)
	if n < AliasMin || n >= pooledMin {
		// Below, grpc-go's pool has tiers that fit (and zeroing them
		// costs little); above, see pooledMin.
		return c.CodecV2.Marshal(v)
	}
	buf := marshalPool.Get(n)
	b, err := protobuf.MarshalOptions{UseCachedSize: true}.MarshalAppend((*buf)[:0], m)
	if err != nil || len(b) != n || &b[0] != &(*buf)[0] {
		marshalPool.Put(buf)
		if err == nil {
			err = fmt.Errorf("%d bytes, not the %d it measured", len(b), n)
		}
		return nil, fmt.Errorf("proto: failed to marshal %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, marshalPool)}, nil
}

// marshalPool holds the buffers Codec marshals into, by powers of two
// from 64 KiB to 1 MiB. Unlike grpc-go's pools it does not zero a buffer
// it hands out: Marshal writes every byte of the message, and nothing
// past the message is read.
var marshalPool = &tieredPool{}

type tieredPool struct{ tiers [5]sync.Pool } // 64 KiB << i

func tierOf(n int) int { return max(0, bits.Len(uint(n-1))-16) }

// Get implements mem.BufferPool.
func (p *tieredPool) Get(n int) *[]byte {
	i := tierOf(n)
	if b, ok := p.tiers[i].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 64<<10<<i)
	return &b
}

// Put implements mem.BufferPool.
func (p *tieredPool) Put(b *[]byte) {
	if c := cap(*b); c >= 64<<10 && c <= pooledMin && c&(c-1) == 0 {
		p.tiers[tierOf(c)].Put(b)
	}
}

// Unmarshal implements encoding.CodecV2.
func (c Codec) Unmarshal(data mem.BufferSlice, v any) error {
	if fd, ok := v.(*flight.FlightData); ok && data.Len() >= AliasMin {
		return Unmarshal(data.Materialize(), fd)
	}
	return c.CodecV2.Unmarshal(data, v)
}

// ErrMalformed: a FlightData message that does not parse.
var ErrMalformed = errors.New("malformed FlightData message")

// Unmarshal decodes b into fd as proto.Unmarshal does (the last
// occurrence of a bytes field wins, message fields merge, unknown fields
// are skipped), but data_header, app_metadata and data_body alias b.
func Unmarshal(b []byte, fd *flight.FlightData) error {
	fd.Reset()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		if num > protowire.MaxValidNumber {
			return fmt.Errorf("%w: field number %d", ErrMalformed, num)
		}
		b = b[n:]
		if typ != protowire.BytesType || (num != 1 && num != 2 && num != 3 && num != 1000) {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
		}
		b = b[n:]
		switch num {
		case 1:
			if fd.FlightDescriptor == nil {
				fd.FlightDescriptor = &flight.FlightDescriptor{}
			}
			if err := (protobuf.UnmarshalOptions{Merge: true}).Unmarshal(v, fd.FlightDescriptor); err != nil {
				return fmt.Errorf("%w: flight_descriptor: %v", ErrMalformed, err)
			}
		// Each field's capacity is its length: a reader slicing past its
		// end must fail, not read the fields that follow it in the
		// message (red team round 17's j02).
		case 2:
			fd.DataHeader = v[:len(v):len(v)]
		case 3:
			fd.AppMetadata = v[:len(v):len(v)]
		case 1000:
			fd.DataBody = v[:len(v):len(v)]
		}
	}
	return nil
}
