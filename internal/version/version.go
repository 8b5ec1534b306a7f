// Package version says which build of agentd's programs is running, from the build
// information the Go toolchain embeds: the module version, and the VCS revision it was
// built from.
package version

import (
	"fmt"
	"runtime/debug"
)

// String returns program's version line, such as
// "agentd v0.3.0 (revision 4f2a9c1d0b7e, 2026-12-01T19:00:00Z) go1.26.0", with
// "+modified" after a revision built with uncommitted changes. A build without VCS
// information (go run, a build outside the repository) says so.
func String(program string) string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return program + " (no build information)"
	}
	return format(program, bi)
}

func format(program string, bi *debug.BuildInfo) string {
	var rev, at string
	modified := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.time":
			at = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	switch {
	case rev == "":
		return fmt.Sprintf("%s %s (no VCS revision) %s", program, v, bi.GoVersion)
	case len(rev) > 12:
		rev = rev[:12]
	}
	if modified {
		rev += "+modified"
	}
	if at != "" {
		rev += ", " + at
	}
	return fmt.Sprintf("%s %s (revision %s) %s", program, v, rev, bi.GoVersion)
}
