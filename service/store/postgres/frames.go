package postgres

import (
	"encoding/binary"
	"errors"
)

// errCorrupt is the error of a journal row whose frames do not decode.
var errCorrupt = errors.New("postgres: corrupt journal row")

// encodeFrames packs a batch's frames into one value: each frame is its length as a
// uvarint, then its bytes.
func encodeFrames(frames [][]byte) []byte {
	n := 0
	for _, f := range frames {
		n += uvarintLen(len(f)) + len(f)
	}
	buf := make([]byte, 0, n)
	for _, f := range frames {
		buf = binary.AppendUvarint(buf, uint64(len(f)))
		buf = append(buf, f...)
	}
	return buf
}

func uvarintLen(n int) int {
	l := 1
	for ; n >= 0x80; n >>= 7 {
		l++
	}
	return l
}

// appendFrames decodes the row of seqs first..last packed in buf and appends to out the
// frames of seqs in (after, upTo]. The frames share buf's memory, each capped at its
// end so that appending to one cannot overwrite the next.
func appendFrames(out [][]byte, buf []byte, first, last, after, upTo int64) ([][]byte, error) {
	seq := first
	for len(buf) > 0 {
		n, k := binary.Uvarint(buf)
		if k <= 0 || n > uint64(len(buf)-k) {
			return out, errCorrupt
		}
		f := buf[k : k+int(n) : k+int(n)]
		buf = buf[k+int(n):]
		if seq > after && seq <= upTo {
			out = append(out, f)
		}
		seq++
	}
	if seq != last+1 {
		return out, errCorrupt
	}
	return out, nil
}
