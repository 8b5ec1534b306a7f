package sqlite_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

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
	if err := s.CreateRun(ctx, store.Run{ID: "run_1", ThreadID: "thread_1", Exclusive: true}); err != nil {
		log.Fatal(err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{RunID: "run_1", First: 1, Frames: [][]byte{[]byte("started"), []byte("text")}}}); err != nil {
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
	// Output:
	// 1 run_1 running 2
	// ["started" "text"]
}
