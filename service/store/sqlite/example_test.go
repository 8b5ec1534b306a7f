package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/sqlite"
)

func Example() {
	dir, err := os.MkdirTemp("", "agentd")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	s, err := sqlite.Open(ctx, filepath.Join(dir, "agentd.db"))
	if err != nil {
		log.Fatal(err)
	}
	// This process holds the run it creates, and writes to it under that lease.
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", ThreadID: "thread_1", Exclusive: true, Holder: "replica_1"}, time.Minute); err != nil {
		log.Fatal(err)
	}
	held := store.Lease{RunID: "run_1", Holder: "replica_1", Epoch: 1}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: held, First: 1, Frames: [][]byte{[]byte("started"), []byte("text")}}}); err != nil {
		log.Fatal(err)
	}
	s.Close()

	// After a restart, the run and its journal are where they were.
	s, err = sqlite.Open(ctx, filepath.Join(dir, "agentd.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer s.Close()
	runs, err := s.UnfinishedRuns(ctx)
	if err != nil {
		log.Fatal(err)
	}
	frames, err := s.ReadEvents(ctx, "run_1", 0, 10)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(runs), runs[0].ID, runs[0].Status, runs[0].LastSeq)
	fmt.Printf("%q\n", frames)

	// The new process takes the run up: the old one's lease is fenced off.
	r, err := s.Claim(ctx, "run_1", "replica_2", time.Minute, true)
	if err != nil {
		log.Fatal(err)
	}
	err = s.AppendEvents(ctx, []store.Events{{Lease: held, First: 3, Frames: [][]byte{[]byte("late")}}})
	fmt.Println(r.Holder, r.Epoch, errors.Is(err, store.ErrFenced))
	// Output:
	// 1 run_1 running 2
	// ["started" "text"]
	// replica_2 2 true
}
