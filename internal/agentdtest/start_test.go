package agentdtest

import (
	"errors"
	"net"
	"path/filepath"
	"strings"
	"testing"
)

// TestStartFailsWithAgentdsLog: an agentd that exits before it serves fails the start
// with what it said.
func TestStartFailsWithAgentdsLog(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts agentd; skipped with -short")
	}
	bin := Build(t, "github.com/agentd/agentd/cmd/agentd")
	_, err := start(bin, Options{Args: []string{"--no-such-flag"}})
	if err == nil || !strings.Contains(err.Error(), "exited") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Errorf("start with an unknown flag: %v, want agentd's exit and its complaint", err)
	}
}

// TestPortTakenIsTold: an agentd whose port another process holds is told apart from
// other failures, so that start tries another port.
func TestPortTakenIsTold(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts agentd; skipped with -short")
	}
	bin := Build(t, "github.com/agentd/agentd/cmd/agentd")
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	p, err := launch(bin, Options{}, lis.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.stop()
	if err := p.waitServing(); !errors.Is(err, errPortTaken) {
		t.Errorf("agentd on a taken port: %v, want errPortTaken", err)
	}
}

// TestBuildReadsRelativePathsFromThePackageFolder: a relative package path names a
// folder from the test's package, wherever the test has moved to.
func TestBuildReadsRelativePathsFromThePackageFolder(t *testing.T) {
	if testing.Short() {
		t.Skip("builds agentd; skipped with -short")
	}
	t.Chdir(t.TempDir())
	if bin := Build(t, "../../cmd/agentd"); filepath.Base(bin) != "agentd" {
		t.Errorf("Build(../../cmd/agentd) = %s, want a file named agentd", bin)
	}
}
