// Package logtest captures what a server writes while a test reads it: [Buffer] is a log
// sink (or any io.Writer) safe for concurrent use, whose text can be read at any time and
// parsed as slog's JSON records ([Buffer.Records]).
//
// Only _test.go files import it.
package logtest
