// Package ids makes the random ids of runs, threads, steps and messages, for the runtime
// and the service alike.
package ids

import (
	"math/rand/v2"
	"strconv"
)

// New returns prefix, '_' and up to 13 random base-36 characters.
func New(prefix string) string {
	var buf [48]byte
	b := append(buf[:0], prefix...)
	b = append(b, '_')
	b = strconv.AppendUint(b, rand.Uint64(), 36)
	return string(b)
}
