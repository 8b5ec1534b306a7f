// Package servicetest runs an agentd service in process, over bufconn, for tests: the
// real grpc.Server with the real service, health and reflection as agentd serves them,
// and a client connected to it ([NewServer], [NewClient]).
//
// [Stream] is a client's side of a Run stream for tests that drive a run message by
// message: [Open] starts a run, [Stream.Send] numbers client messages, [Stream.Until]
// reads up to an event, and [Stream.Finish] reads to the end and checks the events'
// order ([CheckEvents]). [CheckNoLeak] checks that a test stopped every goroutine it
// started.
//
// Every function takes the test it serves: what it starts stops with t.Cleanup, and a
// failure ends the test with t.Fatal.
package servicetest
