// Package postgres is the [store.Store] that a fleet of agentd replicas shares: runs,
// journals, inputs and threads in PostgreSQL tables, reached through a pgx pool.
//
// [Open] connects and brings the schema up to date. Migrations are numbered files
// applied in order, each recorded in schema_migrations, all of them in one transaction
// that holds an advisory lock, so that replicas starting at once migrate once; a
// database migrated by a newer agentd is refused with [ErrNewerSchema]. [WithSchema]
// keeps the tables in a schema of their own.
//
// Every guarantee the interface makes across replicas rests on the database: the one
// active run of a thread is a unique index, an append follows its run's last seq by a
// conditional update that locks the run's row, and timestamps come from the database's
// clock, which every replica shares.
//
// A run's journal keeps one row per appended batch, its frames in one bytea, so that a
// batch costs one row whatever its size; reads slice batches at the seqs asked for.
// Journals are kept whole until [Store.Sweep] removes their run.
package postgres
