// Package agentstest helps tests build agents from an agents file whose agents run on
// scripted models (runtimetest.Model) rather than on a provider's.
//
// Only _test.go files import it.
package agentstest
