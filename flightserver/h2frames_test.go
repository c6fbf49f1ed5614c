package flightserver

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"testing"
)

// h2Frame encodes an HTTP/2 frame.
func h2Frame(typ, flags byte, sid uint32, payload []byte) []byte {
	b := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[5:], sid)
	return append(b, payload...)
}

// h2Client is the start of a client's HTTP/2 bytes: the preface and an
// empty SETTINGS frame.
func h2Client() []byte { return append([]byte(h2Preface), h2Frame(0x4, 0, 0, nil)...) }

// TestH2Frames: DATA payload is attributed to its stream however the
// bytes are split; padding counts (it arrives in the frame), other frame
// types do not; anything that is not HTTP/2 as grpc-go reads it makes the
// follower give up.
func TestH2Frames(t *testing.T) {
	in := h2Client()
	in = append(in, h2Frame(h2FrameHeaders, 4, 3, []byte{0x83, 0x86})...)
	in = append(in, h2Frame(h2FrameData, 0, 3, bytes.Repeat([]byte{1}, 100))...)
	in = append(in, h2Frame(0x8, 0, 3, []byte{0, 0, 0, 1})...)
	in = append(in, h2Frame(h2FrameData, 0, 5, bytes.Repeat([]byte{1}, 7))...)
	in = append(in, h2Frame(h2FrameData, 1, 3, nil)...) // END_STREAM, empty
	in = append(in, h2Frame(h2FrameData, 8, 3, []byte{2, 9, 0, 0})...)
	for _, step := range []int{1, 2, 9, 10, 100, len(in)} {
		var h h2Frames
		got := map[uint32]int{}
		for b := in; len(b) > 0; {
			k := min(step, len(b))
			if h.feed(b[:k]) {
				t.Fatalf("step %d: lost", step)
			}
			for _, r := range h.runs {
				got[r.sid] += r.n
			}
			b = b[k:]
		}
		if got[3] != 104 || got[5] != 7 || len(got) != 2 || h.maxOpened != 3 {
			t.Fatalf("step %d: data %v, max opened %d", step, got, h.maxOpened)
		}
	}
	for name, b := range map[string][]byte{
		"not http2":   []byte("GET / HTTP/1.1\r\n\r\n"),
		"tls":         {0x16, 0x03, 0x01, 0x00, 0xa5},
		"oversize":    append(h2Client(), h2Frame(h2FrameData, 0, 1, make([]byte, h2MaxFrame+1))...),
		"bad preface": []byte(h2Preface[:10] + "x"),
	} {
		var h h2Frames
		if !h.feed(b) || !h.lost() || h.feed([]byte{0}) == false {
			t.Errorf("%s: not lost", name)
		}
	}
}

// FuzzH2Frames: whatever a client sends, the follower does not panic, keeps
// its bounds, and reaches the same attribution however the bytes are
// split.
func FuzzH2Frames(f *testing.F) {
	f.Add([]byte(h2Preface), uint8(1))
	f.Add(append(h2Client(), h2Frame(h2FrameData, 0, 3, []byte("hello"))...), uint8(3))
	f.Add(append(h2Client(), h2Frame(h2FrameHeaders, 0, 0x7fffffff, nil)...), uint8(7))
	f.Add(append(h2Client(), 0xff, 0xff, 0xff, 0, 0, 0xff, 0xff, 0xff, 0xff), uint8(2))
	f.Add([]byte("garbage"), uint8(0))
	f.Fuzz(func(t *testing.T, in []byte, step uint8) {
		whole := map[uint32]int{}
		var h1 h2Frames
		lost1 := h1.feed(in)
		for _, r := range h1.runs {
			if r.n <= 0 {
				t.Fatalf("run %+v", r)
			}
			whole[r.sid] += r.n
		}
		if len(h1.runs) > 1+len(in)/10 {
			t.Fatalf("%d runs for %d bytes", len(h1.runs), len(in))
		}
		var h2 h2Frames
		parts := map[uint32]int{}
		lost2 := false
		for b := in; len(b) > 0; {
			k := min(int(step)+1, len(b))
			lost2 = h2.feed(b[:k])
			for _, r := range h2.runs {
				parts[r.sid] += r.n
			}
			b = b[k:]
		}
		if lost1 != lost2 || lost1 != h1.lost() {
			t.Fatalf("lost whole %v, in parts %v", lost1, lost2)
		}
		if lost1 {
			return
		}
		if fmt.Sprint(whole) != fmt.Sprint(parts) || h1.maxOpened != h2.maxOpened || h1.maxOpened > 1<<31-1 {
			t.Fatalf("whole %v (max %d), in parts %v (max %d)", whole, h1.maxOpened, parts, h2.maxOpened)
		}
		total := 0
		for _, n := range whole {
			total += n
		}
		if total > len(in) {
			t.Fatalf("%d data bytes of %d", total, len(in))
		}
	})
}
