// Package agentdtest runs the real agentd as a process, for the tests that need the binary
// a deployment runs (its flags, environment, signals, exit status and logs) rather than
// the service in process.
//
// [Build] compiles a main package of the module (agentd, agentctl, a test server) once per
// test binary; [Start] runs agentd on a loopback port and returns once its health check
// answers SERVING; [Process.Terminate] sends it SIGTERM and reports how it exited. A
// process a test started is stopped when the test ends, one a [Shared] started when the
// test binary ends: its TestMain runs the tests through [Main], which also removes what
// Build built.
//
//	func TestMain(m *testing.M) {
//		goleak.VerifyTestMain(agentdtest.Main(m))
//	}
//
// Binaries are built without the race detector, as they are deployed: the race detector
// watches agentd's code in the tests that run it in process.
//
// Each function takes the test it serves and ends it with t.Fatal when it cannot do what
// it says. Only _test.go files import the package.
package agentdtest
