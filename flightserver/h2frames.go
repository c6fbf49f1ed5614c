package flightserver

import "encoding/binary"

// h2Preface is what an HTTP/2 client sends first (RFC 9113 §3.4).
const h2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// h2MaxFrame is the largest frame payload grpc-go's server reads (it
// advertises no larger SETTINGS_MAX_FRAME_SIZE than the default and closes
// a connection that sends more); a longer frame makes h2Frames give up.
const h2MaxFrame = 16384

// The HTTP/2 frame types h2Frames looks at.
const (
	h2FrameData    = 0x0
	h2FrameHeaders = 0x1
)

// The states of an h2Frames.
const (
	h2InPreface = iota // matching the client preface
	h2InHeader         // reading a 9-byte frame header
	h2InPayload        // skipping a frame's payload
	h2Lost             // not HTTP/2 as expected: nothing is attributed any more
)

// h2Frames follows the HTTP/2 frames a client sends on a connection, as
// the bytes pass through (recvConn), to tell which of them are DATA frame
// payload of which stream. It keeps no more than a frame header (9 bytes)
// across calls and never looks into payloads, so it buffers nothing. It
// parses bytes a client chose: anything that does not follow the protocol
// (no client preface, a frame longer than grpc-go accepts) makes it give up
// for good (lost), and its caller then treats every byte as possibly a
// message's (the safe direction). It is used by one reader at a time.
type h2Frames struct {
	state int
	off   int // bytes of the preface matched, or of hdr held
	hdr   [9]byte
	typ   byte
	sid   uint32 // stream of the current frame
	left  uint32 // payload bytes of the current frame still to come

	// maxOpened is the highest stream id a HEADERS frame named.
	maxOpened uint32
	// runs are the DATA payload bytes of the last feed, per stream in
	// order of arrival (consecutive bytes of one stream merged). At most
	// one per 10 bytes fed.
	runs []dataRun
}

// dataRun is n bytes of DATA frame payload of stream sid.
type dataRun struct {
	sid uint32
	n   int
}

// lost reports whether h gave up following the frames.
func (h *h2Frames) lost() bool { return h.state == h2Lost }

// feed follows b, the next bytes of the connection, and sets h.runs to the
// DATA payload in it. It reports whether h has lost track (then h.runs
// means nothing).
func (h *h2Frames) feed(b []byte) (lost bool) {
	h.runs = h.runs[:0]
	for len(b) > 0 {
		switch h.state {
		case h2InPreface:
			k := min(len(b), len(h2Preface)-h.off)
			if string(b[:k]) != h2Preface[h.off:h.off+k] {
				h.state = h2Lost
				return true
			}
			h.off += k
			b = b[k:]
			if h.off == len(h2Preface) {
				h.state, h.off = h2InHeader, 0
			}
		case h2InHeader:
			k := copy(h.hdr[h.off:], b)
			h.off += k
			b = b[k:]
			if h.off < len(h.hdr) {
				continue
			}
			h.off = 0
			length := uint32(h.hdr[0])<<16 | uint32(h.hdr[1])<<8 | uint32(h.hdr[2])
			if length > h2MaxFrame {
				h.state = h2Lost
				return true
			}
			h.typ = h.hdr[3]
			h.sid = binary.BigEndian.Uint32(h.hdr[5:9]) & (1<<31 - 1)
			if h.typ == h2FrameHeaders && h.sid > h.maxOpened {
				h.maxOpened = h.sid
			}
			h.left = length
			if length > 0 {
				h.state = h2InPayload
			}
		case h2InPayload:
			k := int(min(uint32(len(b)), h.left))
			h.left -= uint32(k)
			b = b[k:]
			if h.typ == h2FrameData {
				if n := len(h.runs); n > 0 && h.runs[n-1].sid == h.sid {
					h.runs[n-1].n += k
				} else {
					h.runs = append(h.runs, dataRun{sid: h.sid, n: k})
				}
			}
			if h.left == 0 {
				h.state = h2InHeader
			}
		default:
			return true
		}
	}
	return h.state == h2Lost
}
