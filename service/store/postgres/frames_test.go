package postgres

import (
	"bytes"
	"errors"
	"testing"
)

func TestFramesRoundTrip(t *testing.T) {
	batch := [][]byte{{}, []byte("a"), bytes.Repeat([]byte{0x80}, 200), nil, bytes.Repeat([]byte{1}, 70000)}
	buf := encodeFrames(batch)
	if want := 1 + 2 + 2 + 200 + 1 + 3 + 70000; len(buf) != want || cap(buf) != want {
		t.Errorf("encoded %d bytes (capacity %d), want %d", len(buf), cap(buf), want)
	}
	for after := int64(9); after <= 15; after++ {
		for upTo := after; upTo <= 16; upTo++ {
			got, err := appendFrames(nil, buf, 10, 14, after, upTo)
			if err != nil {
				t.Fatalf("(%d, %d]: %v", after, upTo, err)
			}
			var want [][]byte // the batch holds seqs 10..14
			for seq := max(after+1, 10); seq <= min(upTo, 14); seq++ {
				want = append(want, batch[seq-10])
			}
			if len(got) != len(want) {
				t.Fatalf("(%d, %d]: %d frames, want %d", after, upTo, len(got), len(want))
			}
			for i := range got {
				if !bytes.Equal(got[i], want[i]) {
					t.Errorf("(%d, %d)[%d] = %q, want %q", after, upTo, i, got[i], want[i])
				}
			}
		}
	}
	// A frame a caller appends to does not spill into the next.
	got, _ := appendFrames(nil, buf, 1, 5, 0, 5)
	_ = append(got[1], 'x')
	if !bytes.Equal(got[2], batch[2]) {
		t.Errorf("appending to a frame changed the next one")
	}
}

func TestFramesCorrupt(t *testing.T) {
	buf := encodeFrames([][]byte{[]byte("one"), []byte("two")})
	for _, c := range []struct {
		buf         []byte
		first, last int64
	}{
		{buf[:len(buf)-1], 1, 2}, // cut in a frame
		{buf, 1, 3},              // fewer frames than the row says
		{buf, 1, 1},              // more
		{[]byte{0xff}, 1, 1},     // a length cut short
	} {
		if _, err := appendFrames(nil, c.buf, c.first, c.last, 0, 10); !errors.Is(err, errCorrupt) {
			t.Errorf("%x as seqs %d..%d: %v, want errCorrupt", c.buf, c.first, c.last, err)
		}
	}
}
