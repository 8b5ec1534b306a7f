// Package fence holds the rules of leases that the stores share, so that they judge
// alike: whether a lease still holds its run, and which error a refused AppendEvents
// returns.
package fence

import (
	"fmt"
	"slices"

	"github.com/agentd/agentd/service/store"
)

// Holds reports whether a run that holder holds at epoch is held under l. A run no
// replica holds (holder "") is held under no lease, whatever its epoch.
func Holds(holder string, epoch int64, l store.Lease) bool {
	return holder != "" && holder == l.Holder && epoch == l.Epoch
}

// Run is what CheckAppend needs to know of a run.
type Run struct {
	// Found is false for a run that does not exist.
	Found    bool
	Finished bool
	Holder   string
	Epoch    int64
	LastSeq  int64
}

// CheckAppend returns why batches may not be appended to their runs, as run reports
// them, or nil if they all may. In order of precedence: ErrNotFound or ErrFinished for
// the first batch of a missing or finished run; a *store.FencedError naming every run
// a batch is written to under a lease it lost; ErrSeq for the first batch that does not
// follow its run's LastSeq (or the batch of the same run before it). run is asked once
// a run.
func CheckAppend(batches []store.Events, run func(id string) (Run, error)) error {
	runs := map[string]Run{}
	next := map[string]int64{}
	var (
		fenced []string
		seqErr error
	)
	for _, b := range batches {
		id := b.Lease.RunID
		r, ok := runs[id]
		if !ok {
			var err error
			if r, err = run(id); err != nil {
				return err
			}
			runs[id], next[id] = r, r.LastSeq+1
		}
		switch {
		case !r.Found:
			return fmt.Errorf("run %q: %w", id, store.ErrNotFound)
		case r.Finished:
			return fmt.Errorf("run %q: %w", id, store.ErrFinished)
		case !Holds(r.Holder, r.Epoch, b.Lease):
			if !slices.Contains(fenced, id) {
				fenced = append(fenced, id)
			}
			continue
		case b.First != next[id] && seqErr == nil:
			seqErr = fmt.Errorf("run %q: %w: a batch starts at %d, the run is at %d", id, store.ErrSeq, b.First, next[id]-1)
		}
		next[id] += int64(len(b.Frames))
	}
	if len(fenced) > 0 {
		return &store.FencedError{RunIDs: fenced}
	}
	return seqErr
}
