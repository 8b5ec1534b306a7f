package postgres

// Shared reports that the store is shared: several agentd replicas use one database
// at once, each running some of its runs, and take up one another's. The service
// leaves nothing of a parked run in a replica's memory with a shared store, and takes up
// the runs of replicas that die.
func (s *Store) Shared() bool { return true }
