package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
	"github.com/agentd/agentd/service/store/postgres"
	"github.com/agentd/agentd/service/store/sqlite"
)

// storeOpenTimeout bounds opening the store (and migrating it) at start.
const storeOpenTimeout = 30 * time.Second

// openStore opens the store --store names: "memory" (the default: bounded by
// --store-max-bytes and --journal-max-run-bytes, gone with the process),
// "sqlite:PATH" (one replica, across restarts) or a postgres:// URL (what a fleet
// shares).
func openStore(cfg config) (store.Store, error) {
	ctx, cancel := context.WithTimeout(context.Background(), storeOpenTimeout)
	defer cancel()
	switch spec := cfg.store; {
	case spec == "" || spec == "memory":
		return memory.New(memory.Options{MaxBytes: cfg.storeMaxBytes, MaxRunBytes: cfg.journalMaxRunBytes}), nil
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		if path == "" {
			return nil, fmt.Errorf("--store sqlite:PATH needs a file path, such as sqlite:/var/lib/agentd/agentd.db")
		}
		st, err := sqlite.Open(ctx, path)
		if err != nil {
			return nil, fmt.Errorf("--store %s: %w", spec, err)
		}
		return st, nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"):
		st, err := postgres.Open(ctx, spec)
		if err != nil {
			return nil, fmt.Errorf("--store postgres: %w", err)
		}
		return st, nil
	}
	return nil, fmt.Errorf("--store %q: want memory, sqlite:PATH or a postgres:// URL", cfg.store)
}

// storeName says which store spec names, for logs: never the URL, which may hold a
// password.
func storeName(spec string) string {
	switch {
	case spec == "" || spec == "memory":
		return "memory"
	case strings.HasPrefix(spec, "sqlite:"):
		return spec
	}
	return "postgres"
}
