package postgres_test

import (
	"context"
	"log"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/postgres"
)

// Every replica of a fleet opens the same database; the first to start migrates it,
// and the others wait for it.
func ExampleOpen() {
	ctx := context.Background()
	s, err := postgres.Open(ctx, "postgres://agentd@db.internal:5432/agentd?sslmode=verify-full&pool_max_conns=20",
		postgres.WithSchema("agentd"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()

	var _ store.Store = s // what the service is given
}
