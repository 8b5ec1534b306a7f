package postgres

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestSplitSearchPath(t *testing.T) {
	for _, tc := range []struct {
		path string
		want []searchPathEntry
	}{
		{"", nil},
		{`""`, nil},
		{"public", []searchPathEntry{{"public", "public"}}},
		{`"$user", public`, []searchPathEntry{{`"$user"`, "$user"}, {"public", "public"}}},
		{"NoSuch,other", []searchPathEntry{{"NoSuch", "nosuch"}, {"other", "other"}}},
		{`"My ""Schema"", too" , x`, []searchPathEntry{{`"My ""Schema"", too"`, `My "Schema", too`}, {"x", "x"}}},
	} {
		got := splitSearchPath(tc.path)
		if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(searchPathEntry{})); diff != "" {
			t.Errorf("splitSearchPath(%q) (-want +got):\n%s", tc.path, diff)
		}
	}
}
