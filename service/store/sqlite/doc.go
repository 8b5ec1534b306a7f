// Package sqlite keeps agentd's runs, journals, inputs and threads in one SQLite
// file, so that they outlast the process: a [Store] is what `--store sqlite:PATH`
// gives a single replica.
//
// The database runs in WAL mode. Writes go through one connection, one transaction
// per method, so they never contend with one another for SQLite's lock; reads go
// through a small pool of read-only connections and see the last committed state
// without waiting for a write in progress. The schema is versioned: [Open] applies
// the migrations the file lacks and refuses, with [ErrNewerSchema], a file that a
// newer agentd has migrated further.
//
// One process uses the file: leases are timed by its clock, and [Store.Watch] hears
// of the changes made through the Store.
//
// A journal is kept as one row per appended batch, its frames packed in one blob,
// so appending a batch of events costs one insert however many frames it holds.
package sqlite
