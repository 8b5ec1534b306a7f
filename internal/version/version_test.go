package version

import (
	"runtime/debug"
	"testing"
)

func TestFormat(t *testing.T) {
	for _, tc := range []struct {
		bi   debug.BuildInfo
		want string
	}{
		{
			bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "v0.3.0"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "4f2a9c1d0b7e5a6b"}, {Key: "vcs.time", Value: "2026-12-01T19:00:00Z"}, {Key: "vcs.modified", Value: "false"},
			}},
			want: "agentd v0.3.0 (revision 4f2a9c1d0b7e, 2026-12-01T19:00:00Z) go1.26.0",
		},
		{
			bi: debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
				{Key: "vcs.revision", Value: "4f2a9c1"}, {Key: "vcs.modified", Value: "true"},
			}},
			want: "agentd (devel) (revision 4f2a9c1+modified) go1.26.0",
		},
		{
			bi:   debug.BuildInfo{GoVersion: "go1.26.0"},
			want: "agentd (devel) (no VCS revision) go1.26.0",
		},
	} {
		if got := format("agentd", &tc.bi); got != tc.want {
			t.Errorf("format = %q, want %q", got, tc.want)
		}
	}
}
