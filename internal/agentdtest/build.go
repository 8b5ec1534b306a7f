package agentdtest

import (
	"fmt"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// startDir is the folder the test binary started in, its package's: relative package
// paths are read from there, whatever folder a test has moved to since (t.Chdir).
var startDir, startDirErr = os.Getwd()

// The test binary's state: what Build built, and the Shared processes still running. Main
// clears it.
var (
	mu     sync.Mutex
	dir    string // made by the first Build or start; holds the binaries and the logs
	builds = map[string]*build{}
	shared []*Process
)

// build is one package's build, done once.
type build struct {
	once sync.Once
	bin  string
	err  error
}

// Build returns the path of an executable of the main package pkg: an import path
// ("github.com/agentd/agentd/cmd/agentctl") or a path relative to the test's package
// folder ("." or "../agentd"). The first call for pkg builds it with go build; later
// calls, from any test of the binary, wait for that build and return the same file. A
// failed build fails every test that asks for it, with go build's output.
func Build(t testing.TB, pkg string) string {
	t.Helper()
	mu.Lock()
	b := builds[pkg]
	if b == nil {
		b = &build{}
		builds[pkg] = b
	}
	mu.Unlock()
	b.once.Do(func() { b.bin, b.err = goBuild(pkg) })
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// goBuild builds pkg into a folder of its own, under the name of its last element.
func goBuild(pkg string) (string, error) {
	if startDirErr != nil {
		return "", startDirErr
	}
	d, err := workDir()
	if err != nil {
		return "", err
	}
	out, err := os.MkdirTemp(d, "bin-")
	if err != nil {
		return "", err
	}
	name := path.Base(pkg)
	if strings.HasPrefix(pkg, ".") {
		name = filepath.Base(filepath.Join(startDir, pkg))
	}
	bin := filepath.Join(out, name)
	cmd := exec.Command("go", "build", "-o", bin, pkg)
	cmd.Dir = startDir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -o %s %s: %v\n%s", bin, pkg, err, b)
	}
	return bin, nil
}

// workDir returns the harness's temporary folder, made on first use.
func workDir() (string, error) {
	mu.Lock()
	defer mu.Unlock()
	if dir == "" {
		d, err := os.MkdirTemp("", "agentdtest-")
		if err != nil {
			return "", err
		}
		dir = d
	}
	return dir, nil
}

// TestingM is what [Main] wraps: a *testing.M, or the TestingM of go.uber.org/goleak.
type TestingM interface {
	Run() int
}

// Main returns m with a Run that, once m's tests have run, stops the processes that
// [Shared] started and removes what [Build] built and the processes' logs. A TestMain
// whose tests use the package runs them through it, before any leak check:
//
//	goleak.VerifyTestMain(agentdtest.Main(m))
func Main(m TestingM) TestingM { return cleanupM{m} }

type cleanupM struct{ m TestingM }

func (c cleanupM) Run() int {
	code := c.m.Run()
	mu.Lock()
	procs, d := shared, dir
	shared, dir, builds = nil, "", map[string]*build{}
	mu.Unlock()
	for _, p := range procs {
		p.stop()
	}
	if d != "" {
		_ = os.RemoveAll(d)
	}
	return code
}
