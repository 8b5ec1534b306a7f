// Package postgres is the [store.Store] that a fleet of agentd replicas shares: runs,
// journals, inputs and threads in PostgreSQL tables, reached through a pgx pool.
//
// [Open] connects and brings the schema up to date. Migrations are numbered files
// applied in order, each recorded in schema_migrations, all of them in one transaction
// that holds an advisory lock, so that replicas starting at once migrate once; a
// database migrated by a newer agentd is refused with [ErrNewerSchema]. [WithSchema]
// keeps the tables in a schema of their own, which Open creates; a search_path in the
// URL that names no schema the role can use is refused with [ErrNoSchema], and nothing
// is created.
//
// Every guarantee the interface makes across replicas rests on the database: the one
// active run of a thread is a unique index, an append follows its journal's last row
// under its lease's epoch, which it checks holding the run's row locked for share (a
// claim, which updates the row, waits for it), a claim is one conditional update, and
// timestamps, leases' included, come from the database's clock, which every replica
// shares.
//
// Replicas hear of each other's changes by LISTEN/NOTIFY: a transaction that changes
// runs sends one notification as it commits, naming them, on a channel of the schema
// the tables are in; [Store.Watch] listens on a connection of its own.
//
// A run's journal keeps one row per appended batch, its frames in one bytea, so that a
// batch costs one row whatever its size, and AppendEvents writes the batches of every
// run it is given in one statement; reads slice batches at the seqs asked for. The
// run's last seq is its journal's last row's: appending writes no new version of the
// run's row.
// Journals are kept whole until [Store.Sweep] removes their run.
package postgres
