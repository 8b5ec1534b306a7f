package storetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/service/store"
)

// shortLease is a lease that runs out within a test; waitFor polls for what follows
// from it, up to patience.
const (
	shortLease = 50 * time.Millisecond
	patience   = 10 * time.Second
)

// waitFor calls cond every few milliseconds until it returns true, and fails t if it
// has not by patience.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, patience)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// waitClaimable waits until Claimable lists run id: its lease ran out by the store's
// clock.
func waitClaimable(t *testing.T, s store.Store, id string) {
	t.Helper()
	waitFor(t, id+" claimable", func() bool {
		runs, err := s.Claimable(t.Context(), 100)
		if err != nil {
			t.Fatalf("Claimable: %v", err)
		}
		return slices.ContainsFunc(runs, func(r store.Run) bool { return r.ID == id })
	})
}

func mustClaim(t *testing.T, s store.Store, id, by string, force bool) store.Lease {
	t.Helper()
	r, err := s.Claim(t.Context(), id, by, lease, force)
	if err != nil {
		t.Fatalf("Claim(%s) by %s: %v", id, by, err)
	}
	return store.Lease{RunID: id, Holder: by, Epoch: r.Epoch}
}

// fencedRuns returns the runs err names as fenced, sorted, or fails t if err is not a
// *store.FencedError.
func fencedRuns(t *testing.T, err error) []string {
	t.Helper()
	fe, ok := errors.AsType[*store.FencedError](err)
	if !ok || !errors.Is(err, store.ErrFenced) {
		t.Fatalf("AppendEvents: %v, want a FencedError", err)
	}
	return slices.Sorted(slices.Values(fe.RunIDs))
}

// A replica whose run another claimed writes nothing more to it, under its old epoch
// or a released lease, whatever it writes.
func testFencing(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_1"))
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_1", Owner: "token:a"}); err != nil {
		t.Fatal(err)
	}
	stale := leaseOf("run_1")
	mustAppend(t, s, "run_1", 1, frames(1, 2))
	if err := s.AppendMessages(ctx, "thread_1", stale, [][]byte{[]byte("hello")}); err != nil {
		t.Fatal(err)
	}
	b := mustClaim(t, s, "run_1", "replica_b", true)
	if b.Epoch != 2 {
		t.Errorf("claimed at epoch %d, want 2", b.Epoch)
	}

	// Each stale write fails, and leaves the run as replica_b has it.
	check := func(when string, l store.Lease) {
		t.Helper()
		before, _ := s.GetRun(ctx, "run_1")
		if err := s.UpdateRun(ctx, l, store.Update{Status: store.Parked, Checkpoint: []byte("stale")}); !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s: UpdateRun: %v, want ErrFenced", when, err)
		}
		err := s.AppendEvents(ctx, []store.Events{{Lease: l, First: before.LastSeq + 1, Frames: frames(99, 1)}})
		if got := fencedRuns(t, err); !slices.Equal(got, []string{"run_1"}) {
			t.Errorf("%s: AppendEvents names %v, want run_1", when, got)
		}
		err = s.AppendEvents(ctx, []store.Events{{Lease: l, First: before.LastSeq + 1}})
		if got := fencedRuns(t, err); !slices.Equal(got, []string{"run_1"}) {
			t.Errorf("%s: AppendEvents of an empty batch names %v, want run_1", when, got)
		}
		if err := s.AppendMessages(ctx, "thread_1", l, [][]byte{[]byte("stale")}); !errors.Is(err, store.ErrFenced) {
			t.Errorf("%s: AppendMessages: %v, want ErrFenced", when, err)
		}
		after, _ := s.GetRun(ctx, "run_1")
		if after.Status != before.Status || string(after.Checkpoint) != string(before.Checkpoint) || after.LastSeq != before.LastSeq || after.Holder != before.Holder {
			t.Errorf("%s: the run went from %+v to %+v", when, before, after)
		}
		if fs, _ := s.ReadEvents(ctx, "run_1", 0, 100); len(fs) != int(before.LastSeq) {
			t.Errorf("%s: the journal has %d frames, want %d", when, len(fs), before.LastSeq)
		}
		if msgs, _ := s.ThreadMessages(ctx, "thread_1", 0, 100); len(msgs) != 1 {
			t.Errorf("%s: the thread has %d messages, want 1", when, len(msgs))
		}
	}
	check("the first holder's epoch", stale)
	check("the new holder's name at the old epoch", store.Lease{RunID: "run_1", Holder: "replica_b", Epoch: 1})

	// The new lease writes; once released, it does not, nor does a lease of no holder.
	if err := s.AppendEvents(ctx, []store.Events{{Lease: b, First: 3, Frames: frames(3, 1)}}); err != nil {
		t.Fatalf("AppendEvents under the new lease: %v", err)
	}
	mustUpdate(t, s, b, store.Update{Status: store.Running, Release: true})
	check("a released lease", b)
	check("a lease of no holder", store.Lease{RunID: "run_1", Epoch: 2})

	// A finished run is finished, whichever lease writes.
	a := mustClaim(t, s, "run_1", holder, false)
	mustUpdate(t, s, a, store.Update{Status: store.Finished})
	if err := s.UpdateRun(ctx, stale, store.Update{Status: store.Running}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("UpdateRun of a finished run under a stale lease: %v, want ErrFinished", err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: a, First: 4, Frames: frames(4, 1)}}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("AppendEvents to a finished run: %v, want ErrFinished", err)
	}
}

// One fenced batch among good ones: nothing is written, and the error names the fenced
// runs and them alone.
func testAppendFencedAmongGood(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"run_1", "run_2", "run_3", "run_4"} {
		mustCreate(t, s, newRun(id))
	}
	mustClaim(t, s, "run_2", "replica_b", true)
	batches := []store.Events{
		{Lease: leaseOf("run_1"), First: 1, Frames: frames(1, 2)},
		{Lease: leaseOf("run_2"), First: 1, Frames: frames(1, 2)},
		{Lease: leaseOf("run_3"), First: 1, Frames: frames(1, 2)},
		{Lease: leaseOf("run_1"), First: 3, Frames: frames(3, 2)},
	}
	if got := fencedRuns(t, s.AppendEvents(ctx, batches)); !slices.Equal(got, []string{"run_2"}) {
		t.Errorf("the FencedError names %v, want run_2", got)
	}
	mustClaim(t, s, "run_4", "replica_b", true)
	batches = append(batches, store.Events{Lease: leaseOf("run_4"), First: 1, Frames: frames(1, 1)})
	if got := fencedRuns(t, s.AppendEvents(ctx, batches)); !slices.Equal(got, []string{"run_2", "run_4"}) {
		t.Errorf("the FencedError names %v, want run_2 and run_4", got)
	}
	for _, id := range []string{"run_1", "run_2", "run_3", "run_4"} {
		if _, last, err := s.EventBounds(ctx, id); err != nil || last != 0 {
			t.Errorf("%s has %d events after fenced appends, %v; want none", id, last, err)
		}
	}
}

func testClaim(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_1"))
	mustUpdate(t, s, leaseOf("run_1"), store.Update{Status: store.Running, Checkpoint: []byte("cp")})
	if _, err := s.Claim(ctx, "run_1", "replica_b", lease, false); !errors.Is(err, store.ErrHeld) {
		t.Errorf("Claim of a run held by another: %v, want ErrHeld", err)
	}
	if r, _ := s.GetRun(ctx, "run_1"); r.Holder != holder || r.Epoch != 1 {
		t.Errorf("a refused claim changed the run to %q at %d", r.Holder, r.Epoch)
	}
	// Its holder claims it again, as after a restart; force takes it from anyone.
	r, err := s.Claim(ctx, "run_1", holder, lease, false)
	if err != nil || r.Holder != holder || r.Epoch != 2 {
		t.Fatalf("Claim by the run's holder: %q at %d, %v; want %s at 2", r.Holder, r.Epoch, err, holder)
	}
	before := time.Now()
	r, err = s.Claim(ctx, "run_1", "replica_b", lease, true)
	if err != nil || r.Holder != "replica_b" || r.Epoch != 3 {
		t.Fatalf("Claim with force: %q at %d, %v; want replica_b at 3", r.Holder, r.Epoch, err)
	}
	// The run comes back whole, as it now is.
	want := newRun("run_1")
	if r.ID != want.ID || r.ThreadID != want.ThreadID || r.Owner != want.Owner || r.Agent != want.Agent || r.RequestID != want.RequestID ||
		r.Status != store.Running || string(r.Spec) != string(want.Spec) || string(r.Checkpoint) != "cp" || r.CreatedAt.IsZero() {
		t.Errorf("Claim returned %+v", r)
	}
	if r.LeaseUntil.Before(before.Add(lease-time.Second)) || r.LeaseUntil.After(time.Now().Add(lease+time.Second)) {
		t.Errorf("claimed until %v, want about %v from now", r.LeaseUntil, lease)
	}
	if got, _ := s.GetRun(ctx, "run_1"); got.Holder != "replica_b" || got.Epoch != 3 || !got.LeaseUntil.Equal(r.LeaseUntil) {
		t.Errorf("GetRun after the claim: %q at %d until %v", got.Holder, got.Epoch, got.LeaseUntil)
	}

	// A lease that ran out is anyone's.
	short := newRun("run_2")
	if err := s.CreateRun(ctx, short, shortLease); err != nil {
		t.Fatal(err)
	}
	var claimed store.Run
	waitFor(t, "claiming a run whose lease ran out", func() bool {
		claimed, err = s.Claim(ctx, "run_2", "replica_b", lease, false)
		if err != nil && !errors.Is(err, store.ErrHeld) {
			t.Fatalf("Claim of a run whose lease runs out: %v", err)
		}
		return err == nil
	})
	if claimed.Holder != "replica_b" || claimed.Epoch != 2 {
		t.Errorf("the run whose lease ran out was claimed as %q at %d, want replica_b at 2", claimed.Holder, claimed.Epoch)
	}

	mustUpdate(t, s, store.Lease{RunID: "run_2", Holder: "replica_b", Epoch: 2}, store.Update{Status: store.Finished})
	if _, err := s.Claim(ctx, "run_2", "replica_b", lease, true); !errors.Is(err, store.ErrFinished) {
		t.Errorf("Claim of a finished run: %v, want ErrFinished", err)
	}
	if _, err := s.Claim(ctx, "run_nope", "replica_b", lease, true); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Claim of an unknown run: %v, want ErrNotFound", err)
	}
	if _, err := s.Claim(ctx, "run_1", "", lease, true); err == nil {
		t.Errorf("Claim by no holder succeeded")
	}
}

// Of replicas that claim a run whose lease ran out all at once, one wins.
func testClaimRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	if err := s.CreateRun(ctx, newRun("run_1"), shortLease); err != nil {
		t.Fatal(err)
	}
	waitClaimable(t, s, "run_1")
	const replicas = 50
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners []string
	)
	start := make(chan struct{})
	for i := range replicas {
		wg.Go(func() {
			by := fmt.Sprintf("replica_%d", i)
			<-start
			_, err := s.Claim(ctx, "run_1", by, lease, false)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				winners = append(winners, by)
			case !errors.Is(err, store.ErrHeld):
				t.Errorf("Claim by %s: %v", by, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(winners) != 1 {
		t.Fatalf("%d of %d racing claims won: %v; want 1", len(winners), replicas, winners)
	}
	if r, _ := s.GetRun(ctx, "run_1"); r.Holder != winners[0] || r.Epoch != 2 {
		t.Errorf("the run is held by %q at %d, want %s at 2", r.Holder, r.Epoch, winners[0])
	}
}

func testRenew(t *testing.T, s store.Store) {
	ctx := t.Context()
	ids := []string{"run_1", "run_2", "run_3", "run_4"}
	var held []store.Lease
	for _, id := range ids {
		mustCreate(t, s, newRun(id))
		held = append(held, leaseOf(id))
	}
	b := mustClaim(t, s, "run_2", "replica_b", true)
	mustUpdate(t, s, leaseOf("run_3"), store.Update{Status: store.Parked, Release: true})
	mustUpdate(t, s, leaseOf("run_4"), store.Update{Status: store.Finished})
	before := map[string]store.Run{}
	for _, id := range ids {
		before[id], _ = s.GetRun(ctx, id)
	}

	lost, err := s.Renew(ctx, append(held, leaseOf("run_nope")), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(lost)); !slices.Equal(got, []string{"run_2", "run_3", "run_4", "run_nope"}) {
		t.Errorf("Renew lost %v, want run_2 (claimed by another), run_3 (released), run_4 (finished), run_nope", got)
	}
	r, _ := s.GetRun(ctx, "run_1")
	if !r.LeaseUntil.After(time.Now().Add(lease)) || r.Holder != holder || r.Epoch != 1 {
		t.Errorf("the renewed run is held by %q at %d until %v, want %s at 1 for about an hour", r.Holder, r.Epoch, r.LeaseUntil, holder)
	}
	for _, id := range []string{"run_2", "run_3", "run_4"} {
		if r, _ := s.GetRun(ctx, id); !r.LeaseUntil.Equal(before[id].LeaseUntil) || r.Holder != before[id].Holder {
			t.Errorf("%s, not renewed, went from %q until %v to %q until %v", id, before[id].Holder, before[id].LeaseUntil, r.Holder, r.LeaseUntil)
		}
	}
	if lost, err := s.Renew(ctx, []store.Lease{b}, time.Hour); err != nil || len(lost) != 0 {
		t.Errorf("Renew of the claimer's lease: lost %v, %v", lost, err)
	}
	if lost, err := s.Renew(ctx, nil, time.Hour); err != nil || len(lost) != 0 {
		t.Errorf("Renew of no lease: lost %v, %v", lost, err)
	}
}

// Claimable lists the runs that need a holder and have none, longest waiting first.
func testClaimable(t *testing.T, s store.Store) {
	ctx := t.Context()
	now := time.Now()
	park := func(id string, u store.Update) {
		t.Helper()
		mustCreate(t, s, newRun(id))
		mustUpdate(t, s, leaseOf(id), u)
	}
	put := func(id, key string) {
		t.Helper()
		if _, _, err := s.PutInput(ctx, store.Input{RunID: id, Key: key, Request: []byte("input")}); err != nil {
			t.Fatal(err)
		}
	}
	// Running, its lease run out: it waits longest, from before the others were released.
	if err := s.CreateRun(ctx, newRun("run_expired"), shortLease); err != nil {
		t.Fatal(err)
	}
	waitClaimable(t, s, "run_expired")
	park("run_released", store.Update{Status: store.Running, Release: true})
	park("run_wake", store.Update{Status: store.Parked, Release: true, WakeAt: now.Add(-time.Hour)})
	park("run_input", store.Update{Status: store.Parked, Release: true})
	put("run_input", "k")
	// None of these needs a holder, or all have one.
	mustCreate(t, s, newRun("run_held"))
	park("run_parked", store.Update{Status: store.Parked, Release: true})
	put("run_parked", "k")
	if err := s.AnswerInput(ctx, "run_parked", "k", []byte("done")); err != nil {
		t.Fatal(err)
	}
	park("run_later", store.Update{Status: store.Parked, Release: true, WakeAt: now.Add(time.Hour)})
	park("run_finished", store.Update{Status: store.Finished})
	park("run_held_parked", store.Update{Status: store.Parked, WakeAt: now.Add(-time.Hour)})
	put("run_held_parked", "k")

	ids := func(limit int) []string {
		t.Helper()
		runs, err := s.Claimable(ctx, limit)
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range runs {
			ids = append(ids, r.ID)
			if want := newRun(r.ID); string(r.Spec) != string(want.Spec) || r.ThreadID != want.ThreadID {
				t.Errorf("Claimable returned %+v", r)
			}
		}
		return ids
	}
	want := []string{"run_expired", "run_released", "run_wake", "run_input"}
	if got := ids(100); !slices.Equal(got, want) {
		t.Errorf("Claimable = %v, want %v", got, want)
	}
	if got := ids(2); !slices.Equal(got, want[:2]) {
		t.Errorf("Claimable(2) = %v, want %v", got, want[:2])
	}
	// Claimed, a run is claimable no more.
	mustClaim(t, s, "run_wake", "replica_b", false)
	if got := ids(100); !slices.Equal(got, []string{"run_expired", "run_released", "run_input"}) {
		t.Errorf("Claimable after run_wake was claimed = %v", got)
	}
}

// ClaimNext claims what Claimable lists, longest waiting first, and no more than asked.
func testClaimNext(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"run_1", "run_2", "run_3"} {
		mustCreate(t, s, newRun(id))
		mustUpdate(t, s, leaseOf(id), store.Update{Status: store.Running, Release: true})
	}
	mustCreate(t, s, newRun("run_held"))
	claim := func(limit int) []store.Run {
		t.Helper()
		runs, err := s.ClaimNext(ctx, "replica_b", lease, limit, 0)
		if err != nil {
			t.Fatalf("ClaimNext(%d): %v", limit, err)
		}
		return runs
	}
	got := claim(2)
	if len(got) != 2 || got[0].ID != "run_1" || got[1].ID != "run_2" {
		t.Fatalf("ClaimNext(2) = %v, want run_1 and run_2", got)
	}
	for _, r := range got {
		if r.Holder != "replica_b" || r.Epoch != 2 || string(r.Spec) != "spec of "+r.ID || !r.LeaseUntil.After(time.Now()) {
			t.Errorf("ClaimNext returned %+v, want it held by replica_b at epoch 2 with its lease ahead", r)
		}
		// The claim is the holder's: its lease fences, the old one no longer does.
		if err := s.UpdateRun(ctx, leaseOf(r.ID), store.Update{Status: store.Running}); !errors.Is(err, store.ErrFenced) {
			t.Errorf("UpdateRun(%s) under the old lease: %v, want ErrFenced", r.ID, err)
		}
		mustUpdate(t, s, store.Lease{RunID: r.ID, Holder: "replica_b", Epoch: r.Epoch}, store.Update{Status: store.Running})
	}
	if got := claim(10); len(got) != 1 || got[0].ID != "run_3" {
		t.Errorf("ClaimNext(10) after = %v, want run_3 alone", got)
	}
	if got := claim(10); len(got) != 0 {
		t.Errorf("ClaimNext with nothing left = %v", got)
	}
	if _, err := s.ClaimNext(ctx, "", lease, 1, 0); err == nil {
		t.Error("ClaimNext with no holder succeeded")
	}
}

// ClaimNext leaves a parked run due to wake until it has been due for wakeAfter,
// unless an input waits for it.
func testClaimNextWakeAfter(t *testing.T, s store.Store) {
	ctx := t.Context()
	due := time.Now().Add(-time.Minute)
	for id, at := range map[string]time.Time{"run_due": due, "run_input": due.Add(time.Hour)} {
		mustCreate(t, s, newRun(id))
		mustUpdate(t, s, leaseOf(id), store.Update{Status: store.Parked, Release: true, WakeAt: at})
	}
	if _, _, err := s.PutInput(ctx, store.Input{RunID: "run_input", Key: "k", Request: []byte("input")}); err != nil {
		t.Fatal(err)
	}
	got, err := s.ClaimNext(ctx, "replica_b", lease, 10, time.Hour)
	if err != nil || len(got) != 1 || got[0].ID != "run_input" {
		t.Fatalf("ClaimNext(wake after an hour) = %v, %v; want run_input alone", got, err)
	}
	got, err = s.ClaimNext(ctx, "replica_b", lease, 10, time.Second)
	if err != nil || len(got) != 1 || got[0].ID != "run_due" {
		t.Fatalf("ClaimNext(wake after a second) = %v, %v; want run_due, due a minute ago", got, err)
	}
}

// Heartbeat returns the replicas alive, oldest first, as each last said it was.
func testHeartbeat(t *testing.T, s store.Store) {
	ctx := t.Context()
	t0 := time.Now().Add(-time.Hour).Truncate(time.Microsecond)
	beat := func(id string, started time.Time, draining bool) []store.Replica {
		t.Helper()
		got, err := s.Heartbeat(ctx, store.Replica{ID: id, StartedAt: started, Draining: draining}, time.Minute)
		if err != nil {
			t.Fatalf("Heartbeat(%s): %v", id, err)
		}
		return got
	}
	ids := func(rs []store.Replica) []string {
		var out []string
		for _, r := range rs {
			out = append(out, fmt.Sprintf("%s:%v", r.ID, r.Draining))
			if r.ID == "replica_old" && !r.StartedAt.Equal(t0) {
				t.Errorf("replica_old started at %v, want %v", r.StartedAt, t0)
			}
		}
		return out
	}
	if got := ids(beat("replica_new", t0.Add(time.Minute), false)); !slices.Equal(got, []string{"replica_new:false"}) {
		t.Errorf("the first Heartbeat = %v", got)
	}
	beat("replica_old", t0, false)
	if got := ids(beat("replica_new", t0.Add(time.Minute), true)); !slices.Equal(got, []string{"replica_old:false", "replica_new:true"}) {
		t.Errorf("Heartbeat of two replicas = %v, want the older first, as each last said it was", got)
	}
	got, err := s.Heartbeat(ctx, store.Replica{ID: "replica_new", StartedAt: t0.Add(time.Minute)}, 0)
	if err != nil || len(got) != 1 || got[0].ID != "replica_new" {
		t.Errorf("Heartbeat of those seen just now = %v, %v; want the replica itself", got, err)
	}
}

// Replicas that claim at once share the runs: each is claimed once.
func testClaimNextRace(t *testing.T, s store.Store) {
	ctx := t.Context()
	const runs, replicas = 60, 4
	for i := range runs {
		id := fmt.Sprintf("run_%02d", i)
		mustCreate(t, s, newRun(id))
		mustUpdate(t, s, leaseOf(id), store.Update{Status: store.Running, Release: true})
	}
	var mu sync.Mutex
	by := map[string][]string{}
	var wg sync.WaitGroup
	for r := range replicas {
		name := fmt.Sprintf("replica_%d", r)
		wg.Go(func() {
			for {
				got, err := s.ClaimNext(ctx, name, lease, 7, 0)
				if err != nil {
					t.Errorf("ClaimNext by %s: %v", name, err)
					return
				}
				if len(got) == 0 {
					return
				}
				mu.Lock()
				for _, r := range got {
					by[r.ID] = append(by[r.ID], name)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(by) != runs {
		t.Errorf("%d runs claimed, want %d", len(by), runs)
	}
	for id, who := range by {
		if len(who) != 1 {
			t.Errorf("%s claimed by %v, want once", id, who)
		}
	}
}

func testPendingInputs(t *testing.T, s store.Store) {
	ctx := t.Context()
	put := func(id, key string) store.Input {
		t.Helper()
		in, created, err := s.PutInput(ctx, store.Input{RunID: id, Key: key, Digest: []byte("d " + key), Request: []byte("r " + key)})
		if err != nil || !created {
			t.Fatalf("PutInput(%s, %s): %v, %v", id, key, created, err)
		}
		return in
	}
	for _, id := range []string{"run_1", "run_2", "run_3"} {
		mustCreate(t, s, newRun(id))
	}
	// Keys that sort against the order they come in.
	k3, k2, k1 := put("run_1", "k3"), put("run_1", "k2"), put("run_1", "k1")
	k4 := put("run_2", "k4")
	put("run_3", "k5")
	if !(k3.Order < k2.Order && k2.Order < k1.Order) {
		t.Errorf("inputs put in turn have Order %d, %d, %d; want them increasing", k3.Order, k2.Order, k1.Order)
	}
	if err := s.AnswerInput(ctx, "run_1", "k2", []byte("ack")); err != nil {
		t.Fatal(err)
	}
	got, err := s.PendingInputs(ctx, []string{"run_2", "run_1", "run_nope"})
	if err != nil {
		t.Fatal(err)
	}
	byRun := map[string][]string{}
	for _, in := range got {
		byRun[in.RunID] = append(byRun[in.RunID], in.Key)
		if string(in.Request) != "r "+in.Key || string(in.Digest) != "d "+in.Key || in.Answer != nil {
			t.Errorf("pending input %+v", in)
		}
	}
	if len(got) != 3 || !slices.Equal(byRun["run_1"], []string{"k3", "k1"}) || !slices.Equal(byRun["run_2"], []string{"k4"}) {
		t.Errorf("PendingInputs = %v, want run_1's k3 then k1, and run_2's k4", byRun)
	}
	for _, in := range got {
		if in.Key == "k4" && in.Order != k4.Order || in.Key == "k1" && in.Order != k1.Order {
			t.Errorf("pending input %s has Order %d, not what PutInput returned", in.Key, in.Order)
		}
	}
	if got, err := s.PendingInputs(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("PendingInputs of no run: %v, %v", got, err)
	}
}

// watcher records the calls of a Watch's func.
type watcher struct {
	mu     sync.Mutex
	calls  [][]string
	called chan struct{} // a call since the last look
}

func watch(ctx context.Context, s store.Store) *watcher {
	w := &watcher{called: make(chan struct{}, 1)}
	s.Watch(ctx, func(ids []string) {
		w.mu.Lock()
		w.calls = append(w.calls, slices.Clone(ids))
		w.mu.Unlock()
		select {
		case w.called <- struct{}{}:
		default:
		}
	})
	return w
}

func (w *watcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.calls)
}

// saw reports whether a call from the nth on named id.
func (w *watcher) saw(n int, id string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, ids := range w.calls[min(n, len(w.calls)):] {
		if slices.Contains(ids, id) {
			return true
		}
	}
	return false
}

// within reports whether a call from the nth on names id within d.
func (w *watcher) within(n int, id string, d time.Duration) bool {
	timeout := time.After(d)
	for !w.saw(n, id) {
		select {
		case <-w.called:
		case <-timeout:
			return false
		}
	}
	return true
}

// await fails t unless a call from the nth on names id within patience.
func (w *watcher) await(t *testing.T, n int, id, after string) {
	t.Helper()
	if !w.within(n, id, patience) {
		t.Fatalf("Watch did not report %s after %s", id, after)
	}
}

// live waits until w hears of changes, as a store that listens to the database needs
// a moment to: it touches the run of l until w reports it.
func (w *watcher) live(t *testing.T, s store.Store, l store.Lease) {
	t.Helper()
	deadline := time.Now().Add(patience)
	for {
		n := w.count()
		mustUpdate(t, s, l, store.Update{Status: store.Running})
		if w.within(n, l.RunID, 50*time.Millisecond) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Watch reported no change within %v", patience)
		}
	}
}

func testWatch(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_probe"))
	mustCreate(t, s, newRun("run_1"))
	actx, stopA := context.WithCancel(ctx)
	defer stopA()
	a, b := watch(actx, s), watch(ctx, s)
	a.live(t, s, leaseOf("run_probe"))
	b.live(t, s, leaseOf("run_probe"))

	l := leaseOf("run_1")
	for _, c := range []struct {
		what   string
		change func() error
		id     string // what Watch reports; "" for run_1
	}{
		{"an append", func() error { return s.AppendEvents(ctx, []store.Events{{Lease: l, First: 1, Frames: frames(1, 2)}}) }, ""},
		{"a put input", func() error { _, _, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "k"}); return err }, store.InputPrefix + "run_1"},
		{"an answer", func() error { return s.AnswerInput(ctx, "run_1", "k", []byte("ack")) }, ""},
		{"a checkpoint", func() error {
			return s.UpdateRun(ctx, l, store.Update{Status: store.Running, Checkpoint: []byte("cp")})
		}, ""},
		{"a release", func() error { return s.UpdateRun(ctx, l, store.Update{Status: store.Parked, Release: true}) }, ""},
		{"a claim", func() error { r, err := s.Claim(ctx, "run_1", holder, lease, false); l.Epoch = r.Epoch; return err }, ""},
		{"a finish", func() error { return s.UpdateRun(ctx, l, store.Update{Status: store.Finished}) }, ""},
	} {
		na, nb := a.count(), b.count()
		if err := c.change(); err != nil {
			t.Fatalf("%s: %v", c.what, err)
		}
		id := cmp.Or(c.id, "run_1")
		a.await(t, na, id, c.what)
		b.await(t, nb, id, c.what)
	}

	// Once its context ends, a watcher hears of nothing more, while the others do.
	stopA()
	n := a.count()
	for i := range 3 {
		nb := b.count()
		mustUpdate(t, s, leaseOf("run_probe"), store.Update{Status: store.Running})
		b.await(t, nb, "run_probe", fmt.Sprintf("update %d", i))
	}
	if got := a.count(); got != n {
		t.Errorf("a Watch whose context ended was called %d times more", got-n)
	}
}

// Upgraded checks a store opened on a database written before leases, which held
// run_1, parked, with the unanswered inputs b then a: the run is held by none and
// claimable, its inputs keep their order, and new ones follow them. It returns the run
// as the store first read it.
func Upgraded(t *testing.T, s store.Store) store.Run {
	t.Helper()
	ctx := t.Context()
	r, err := s.GetRun(ctx, "run_1")
	if err != nil || r.Holder != "" || r.Epoch != 0 || r.LeaseUntil.After(time.Now()) || r.Status != store.Parked {
		t.Errorf("a run from before leases: %+v, %v; want parked, held by none", r, err)
	}
	ins, err := s.PendingInputs(ctx, []string{"run_1"})
	if err != nil || len(ins) != 2 || ins[0].Key != "b" || ins[1].Key != "a" || ins[0].Order >= ins[1].Order {
		t.Fatalf("its inputs: %+v, %v; want b then a", ins, err)
	}
	if runs, err := s.Claimable(ctx, 10); err != nil || len(runs) != 1 {
		t.Errorf("Claimable: %d runs, %v; want the parked run with inputs", len(runs), err)
	}
	if r, err := s.Claim(ctx, "run_1", holder, lease, false); err != nil || r.Epoch != 1 {
		t.Errorf("Claim of the run: epoch %d, %v", r.Epoch, err)
	}
	in, _, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "c"})
	if err != nil || in.Order <= ins[1].Order {
		t.Errorf("a new input: %+v, %v; want it ordered after the old ones", in, err)
	}
	return r
}
