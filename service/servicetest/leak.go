package servicetest

import (
	"testing"

	"go.uber.org/goleak"
)

// CheckNoLeak makes t fail if goroutines that were not running when it was called are
// still running once t's cleanups have run. Call it first in the test: cleanups run last
// registered first, so the check then runs after everything the test started has been
// stopped. It suits tests that start servers of their own, which a package-wide
// goleak.VerifyTestMain would only blame at the end, without naming the test.
func CheckNoLeak(t testing.TB) {
	opt := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, opt) })
}
