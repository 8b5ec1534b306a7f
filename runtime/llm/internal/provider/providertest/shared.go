package providertest

import "testing"

// TestShared runs, as subtests, the shared tests that need nothing of an adapter but
// its [Adapter]: [TestNew], [TestRetries], [TestStalls], [TestCancel] and
// [TestKeyNotInErrors].
func TestShared(t *testing.T, a Adapter) {
	for _, s := range []struct {
		name string
		test func(*testing.T, Adapter)
	}{{"New", TestNew}, {"Retries", TestRetries}, {"Stalls", TestStalls}, {"Cancel", TestCancel}, {"KeyNotInErrors", TestKeyNotInErrors}} {
		t.Run(s.name, func(t *testing.T) { s.test(t, a) })
	}
}

// Must returns v, failing t at once when err is not nil: for an adapter's New in tests.
func Must[T any](t testing.TB) func(v T, err error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}
