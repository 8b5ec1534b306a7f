// Package tlstest makes the certificates and TLS gRPC servers that agentd's tests need:
// a certificate authority made for one test ([NewCA]), certificates it signs for
// servers and clients ([CA.Issue]), PEM files of them for configuration that names
// files ([CA.WriteCertFile], [WriteCertFile], [WriteKeyFile]), and a gRPC server on a
// loopback TCP port behind TLS ([ServeTLS]).
//
// Each function takes the test it serves: a server stops with t.Cleanup, and a failure
// to make or write anything ends the test with t.Fatal. Nothing here is meant for
// production: keys are fresh ECDSA P-256 keys, and certificates are valid from an hour
// before they are made to an hour after.
//
// The package imports only the standard library and grpc, and only _test.go files
// import it.
package tlstest
