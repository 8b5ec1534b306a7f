// Package storetest is the conformance suite of store.Store: every store runs it, and
// passes it, so that the service can rely on what the interface says whatever the
// store.
package storetest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentd/agentd/service/store"
)

// Run runs the suite; open returns a new, empty store for one test, which the test
// closes.
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			t.Cleanup(func() {
				if err := s.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
			})
			c.run(t, s)
		})
	}
}

var cases = []struct {
	name string
	run  func(t *testing.T, s store.Store)
}{
	{"CreateAndGetRun", testCreateAndGetRun},
	{"OneActiveRunPerThread", testOneActiveRunPerThread},
	{"UpdateRun", testUpdateRun},
	{"UnfinishedRuns", testUnfinishedRuns},
	{"AppendAndRead", testAppendAndRead},
	{"ReadNewEvents", testReadNewEvents},
	{"AppendIsAllOrNothing", testAppendIsAllOrNothing},
	{"AppendAfterFinish", testAppendAfterFinish},
	{"ConcurrentAppends", testConcurrentAppends},
	{"Inputs", testInputs},
	{"Threads", testThreads},
	{"ListThreads", testListThreads},
	{"Grants", testGrants},
	{"Sweep", testSweep},
	{"ChildRuns", testChildRuns},
	{"SweepKeepsTrees", testSweepKeepsTrees},
	{"ContextDone", testContextDone},
	{"Fencing", testFencing},
	{"AppendFencedAmongGood", testAppendFencedAmongGood},
	{"Claim", testClaim},
	{"ClaimRace", testClaimRace},
	{"Renew", testRenew},
	{"Claimable", testClaimable},
	{"ClaimNext", testClaimNext},
	{"ClaimNextRace", testClaimNextRace},
	{"ClaimNextWakeAfter", testClaimNextWakeAfter},
	{"Heartbeat", testHeartbeat},
	{"PendingInputs", testPendingInputs},
	{"Watch", testWatch},
}

// holder is the replica that creates the suite's runs, and lease how long it holds
// them: longer than any test.
const (
	holder = "replica_a"
	lease  = time.Minute
)

func newRun(id string) store.Run {
	return store.Run{ID: id, ThreadID: "thread_" + id, Owner: "token:a", Agent: "demo", RequestID: "req-" + id, Status: store.Running, Spec: []byte("spec of " + id), Holder: holder}
}

func mustCreate(t *testing.T, s store.Store, r store.Run) {
	t.Helper()
	if err := s.CreateRun(t.Context(), r, lease); err != nil {
		t.Fatalf("CreateRun(%s): %v", r.ID, err)
	}
}

// leaseOf is the lease a run the suite created is held by until it is claimed.
func leaseOf(id string) store.Lease {
	return store.Lease{RunID: id, Holder: holder, Epoch: 1}
}

func mustUpdate(t *testing.T, s store.Store, l store.Lease, u store.Update) {
	t.Helper()
	if err := s.UpdateRun(t.Context(), l, u); err != nil {
		t.Fatalf("UpdateRun(%s, %v): %v", l.RunID, u.Status, err)
	}
}

func frames(first, n int) [][]byte {
	out := make([][]byte, n)
	for i := range out {
		out[i] = fmt.Appendf(nil, "frame %d", first+i)
	}
	return out
}

func mustAppend(t *testing.T, s store.Store, id string, first int64, fs [][]byte) {
	t.Helper()
	if err := s.AppendEvents(t.Context(), []store.Events{{Lease: leaseOf(id), First: first, Frames: fs}}); err != nil {
		t.Fatalf("AppendEvents(%s, %d, %d frames): %v", id, first, len(fs), err)
	}
}

func testCreateAndGetRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	r := newRun("run_1")
	r.Exclusive = true
	before := time.Now().Add(-time.Minute)
	mustCreate(t, s, r)
	got, err := s.GetRun(ctx, "run_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.ID != r.ID || got.ThreadID != r.ThreadID || !got.Exclusive || got.Owner != r.Owner || got.Agent != r.Agent || got.RequestID != r.RequestID || got.Status != store.Running || !bytes.Equal(got.Spec, r.Spec) || got.Checkpoint != nil || got.LastSeq != 0 {
		t.Errorf("GetRun = %+v, want %+v", got, r)
	}
	if got.CreatedAt.Before(before) || got.CreatedAt.After(time.Now().Add(time.Minute)) || !got.FinishedAt.IsZero() {
		t.Errorf("CreatedAt %v, FinishedAt %v: want about now, and zero", got.CreatedAt, got.FinishedAt)
	}
	// Held by its creator at epoch 1, for the lease from when it was created.
	if got.Holder != holder || got.Epoch != 1 || !got.WakeAt.IsZero() {
		t.Errorf("a new run is held by %q at epoch %d, wakes at %v; want %s at 1, never", got.Holder, got.Epoch, got.WakeAt, holder)
	}
	if d := got.LeaseUntil.Sub(got.CreatedAt); d < lease-time.Second || d > lease+time.Second {
		t.Errorf("a new run's lease ends %v after its creation, want %v", d, lease)
	}
	if err := s.CreateRun(ctx, r, lease); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateRun of an existing id: %v, want ErrExists", err)
	}
	anon := newRun("run_anon")
	anon.Holder = ""
	if err := s.CreateRun(ctx, anon, lease); err == nil {
		t.Errorf("CreateRun of a run held by none succeeded")
	}
	if _, err := s.GetRun(ctx, "run_anon"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the run held by none was recorded: %v", err)
	}
	if _, err := s.GetRun(ctx, "run_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetRun of an unknown id: %v, want ErrNotFound", err)
	}
}

func testOneActiveRunPerThread(t *testing.T, s store.Store) {
	ctx := t.Context()
	a := newRun("run_a")
	a.ThreadID, a.Exclusive = "thread_x", true
	mustCreate(t, s, a)
	b := newRun("run_b")
	b.ThreadID, b.Exclusive = "thread_x", true
	err := s.CreateRun(ctx, b, lease)
	var busy *store.ThreadBusyError
	if !errors.As(err, &busy) || busy.RunID != "run_a" {
		t.Fatalf("a second exclusive run on the thread: %v, want a ThreadBusyError naming run_a", err)
	}
	if _, err := s.GetRun(ctx, "run_b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the refused run was recorded: %v", err)
	}
	// A run that does not keep the thread is no bother, nor is one on another thread.
	c := newRun("run_c")
	c.ThreadID = "thread_x"
	mustCreate(t, s, c)
	d := newRun("run_d")
	d.ThreadID, d.Exclusive = "thread_y", true
	mustCreate(t, s, d)
	// Parked still holds the thread; finished frees it.
	mustUpdate(t, s, leaseOf("run_a"), store.Update{Status: store.Parked, Checkpoint: []byte("cp"), Release: true})
	if err := s.CreateRun(ctx, b, lease); !errors.As(err, &busy) {
		t.Errorf("an exclusive run on a thread whose run is parked: %v, want ThreadBusyError", err)
	}
	if _, err := s.Claim(ctx, "run_a", holder, lease, false); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, store.Lease{RunID: "run_a", Holder: holder, Epoch: 2}, store.Update{Status: store.Finished})
	mustCreate(t, s, b)

	// Many at once: exactly one wins.
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := range 20 {
		wg.Go(func() {
			r := newRun(fmt.Sprintf("run_race_%d", i))
			r.ThreadID, r.Exclusive = "thread_race", true
			err := s.CreateRun(ctx, r, lease)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				won++
			case !errors.As(err, new(*store.ThreadBusyError)):
				t.Errorf("racing CreateRun: %v", err)
			}
		})
	}
	wg.Wait()
	if won != 1 {
		t.Errorf("%d of 20 racing exclusive runs on one thread were created, want 1", won)
	}
}

func testUpdateRun(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_1"))
	l := leaseOf("run_1")
	wake := time.Now().Add(time.Hour).Truncate(time.Millisecond)
	mustUpdate(t, s, l, store.Update{Status: store.Running, Checkpoint: []byte("checkpoint 1")})
	mustUpdate(t, s, l, store.Update{Status: store.Parked, WakeAt: wake})
	got, err := s.GetRun(ctx, "run_1")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != store.Parked || string(got.Checkpoint) != "checkpoint 1" || !got.WakeAt.Equal(wake) {
		t.Errorf("after a checkpoint and a park without one: %v %q waking at %v, want parked with checkpoint 1 waking at %v", got.Status, got.Checkpoint, got.WakeAt, wake)
	}
	if got.Holder != holder || got.Epoch != 1 {
		t.Errorf("a park that does not release: held by %q at %d, want %s at 1", got.Holder, got.Epoch, holder)
	}
	// An update without WakeAt clears it; Release lets go of the run.
	mustUpdate(t, s, l, store.Update{Status: store.Parked, Release: true})
	got, _ = s.GetRun(ctx, "run_1")
	if !got.WakeAt.IsZero() || got.Holder != "" || got.Epoch != 1 || got.LeaseUntil.After(time.Now().Add(time.Second)) {
		t.Errorf("released: wakes at %v, held by %q at %d until %v; want never, by none, at 1, until now", got.WakeAt, got.Holder, got.Epoch, got.LeaseUntil)
	}
	if err := s.UpdateRun(ctx, l, store.Update{Status: store.Running}); !errors.Is(err, store.ErrFenced) {
		t.Errorf("UpdateRun under a released lease: %v, want ErrFenced", err)
	}
	claimed, err := s.Claim(ctx, "run_1", holder, lease, false)
	if err != nil {
		t.Fatal(err)
	}
	l = store.Lease{RunID: "run_1", Holder: holder, Epoch: claimed.Epoch}
	mustUpdate(t, s, l, store.Update{Status: store.Finished, Checkpoint: []byte("last"), WakeAt: wake})
	got, _ = s.GetRun(ctx, "run_1")
	if got.Status != store.Finished || got.FinishedAt.IsZero() || string(got.Checkpoint) != "last" || got.Holder != "" {
		t.Errorf("finished: %+v", got)
	}
	if err := s.UpdateRun(ctx, l, store.Update{Status: store.Running}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("UpdateRun of a finished run: %v, want ErrFinished", err)
	}
	if err := s.UpdateRun(ctx, leaseOf("run_nope"), store.Update{Status: store.Parked}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("UpdateRun of an unknown run: %v, want ErrNotFound", err)
	}
}

func testUnfinishedRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"run_1", "run_2", "run_3", "run_4"} {
		mustCreate(t, s, newRun(id))
		time.Sleep(2 * time.Millisecond) // distinct creation times
	}
	mustUpdate(t, s, leaseOf("run_2"), store.Update{Status: store.Finished})
	mustUpdate(t, s, leaseOf("run_3"), store.Update{Status: store.Parked, Checkpoint: []byte("cp")})
	runs, err := s.UnfinishedRuns(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, r := range runs {
		ids = append(ids, r.ID)
	}
	if !slices.Equal(ids, []string{"run_1", "run_3", "run_4"}) {
		t.Errorf("UnfinishedRuns = %v, want run_1, run_3, run_4 (oldest first)", ids)
	}
	if runs[1].Status != store.Parked || string(runs[1].Checkpoint) != "cp" || string(runs[1].Spec) != "spec of run_3" {
		t.Errorf("the parked run came back as %+v", runs[1])
	}
}

// ReadNewEvents reads several runs at once, each after its own seq, as ReadEvents
// would read each.
func testReadNewEvents(t *testing.T, s store.Store) {
	ctx := t.Context()
	all := frames(1, 40)
	for _, id := range []string{"run_1", "run_2", "run_3"} {
		mustCreate(t, s, newRun(id))
	}
	seq := 0
	for _, n := range []int{3, 10, 27} {
		mustAppend(t, s, "run_1", int64(seq+1), all[seq:seq+n])
		seq += n
	}
	mustAppend(t, s, "run_2", 1, all[:5])
	for _, limit := range []int{1, 4, 100} {
		got, err := s.ReadNewEvents(ctx, map[string]int64{"run_1": 5, "run_2": 5, "run_3": 0, "run_nope": 0}, limit)
		if err != nil {
			t.Fatalf("ReadNewEvents(limit %d): %v", limit, err)
		}
		want := all[5:min(5+limit, 40)]
		if len(got) != 1 || len(got["run_1"]) != len(want) {
			t.Fatalf("ReadNewEvents(limit %d) = %d runs, run_1's %d frames; want run_1 alone, %d frames", limit, len(got), len(got["run_1"]), len(want))
		}
		for i, f := range got["run_1"] {
			if !bytes.Equal(f, want[i]) {
				t.Fatalf("ReadNewEvents(limit %d): run_1's frame %d = %q, want %q", limit, i, f, want[i])
			}
		}
	}
	got, err := s.ReadNewEvents(ctx, map[string]int64{"run_1": 39, "run_2": 0}, 10)
	if err != nil || len(got) != 2 || string(got["run_1"][0]) != "frame 40" || len(got["run_2"]) != 5 || string(got["run_2"][4]) != "frame 5" {
		t.Errorf("ReadNewEvents of two runs = %q, %v", got, err)
	}
	if got, err := s.ReadNewEvents(ctx, nil, 10); err != nil || len(got) != 0 {
		t.Errorf("ReadNewEvents of no run = %q, %v", got, err)
	}
}

func testAppendAndRead(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_1"))
	if oldest, last, err := s.EventBounds(ctx, "run_1"); err != nil || oldest != 1 || last != 0 {
		t.Errorf("EventBounds of a run with no events: %d, %d, %v; want 1, 0", oldest, last, err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 0, 10); err != nil || len(fs) != 0 {
		t.Errorf("ReadEvents of a run with no events: %d frames, %v", len(fs), err)
	}
	// Batches of different sizes, so that reads cut through them.
	all := frames(1, 100)
	seq := 0
	for _, n := range []int{1, 7, 30, 2, 60} {
		mustAppend(t, s, "run_1", int64(seq+1), all[seq:seq+n])
		seq += n
	}
	got, _ := s.GetRun(ctx, "run_1")
	if got.LastSeq != 100 {
		t.Errorf("LastSeq %d after 100 events", got.LastSeq)
	}
	if oldest, last, err := s.EventBounds(ctx, "run_1"); err != nil || oldest != 1 || last != 100 {
		t.Errorf("EventBounds = %d, %d, %v; want 1, 100", oldest, last, err)
	}
	for after := 0; after <= 100; after++ {
		for _, limit := range []int{1, 3, 50, 1000} {
			fs, err := s.ReadEvents(ctx, "run_1", int64(after), limit)
			if err != nil {
				t.Fatalf("ReadEvents(after %d, limit %d): %v", after, limit, err)
			}
			want := all[after:min(after+limit, 100)]
			if len(fs) != len(want) {
				t.Fatalf("ReadEvents(after %d, limit %d): %d frames, want %d", after, limit, len(fs), len(want))
			}
			for i := range fs {
				if !bytes.Equal(fs[i], want[i]) {
					t.Fatalf("ReadEvents(after %d, limit %d)[%d] = %q, want %q", after, limit, i, fs[i], want[i])
				}
			}
		}
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 500, 10); err != nil || len(fs) != 0 {
		t.Errorf("ReadEvents past the end: %d frames, %v; want none", len(fs), err)
	}
	// Out of sequence: a gap, a repeat, a start that is not 1.
	for _, first := range []int64{102, 100, 1} {
		if err := s.AppendEvents(ctx, []store.Events{{Lease: leaseOf("run_1"), First: first, Frames: frames(int(first), 2)}}); !errors.Is(err, store.ErrSeq) {
			t.Errorf("AppendEvents at %d after 100: %v, want ErrSeq", first, err)
		}
	}
	mustCreate(t, s, newRun("run_2"))
	if err := s.AppendEvents(ctx, []store.Events{{Lease: leaseOf("run_2"), First: 2, Frames: frames(2, 1)}}); !errors.Is(err, store.ErrSeq) {
		t.Errorf("a first batch at seq 2: %v, want ErrSeq", err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: leaseOf("run_nope"), First: 1, Frames: frames(1, 1)}}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendEvents to an unknown run: %v, want ErrNotFound", err)
	}
	if _, err := s.ReadEvents(ctx, "run_nope", 0, 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ReadEvents of an unknown run: %v, want ErrNotFound", err)
	}
	if _, _, err := s.EventBounds(ctx, "run_nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("EventBounds of an unknown run: %v, want ErrNotFound", err)
	}
	// Frames come back as they went in, whatever their bytes.
	odd := [][]byte{{}, {0}, bytes.Repeat([]byte{0xff, 0}, 40000)}
	mustCreate(t, s, newRun("run_3"))
	mustAppend(t, s, "run_3", 1, odd)
	fs, err := s.ReadEvents(ctx, "run_3", 0, 10)
	if err != nil || len(fs) != 3 || len(fs[0]) != 0 || !bytes.Equal(fs[1], odd[1]) || !bytes.Equal(fs[2], odd[2]) {
		t.Errorf("empty, one-byte and 80 KB frames came back as %d frames, %v", len(fs), err)
	}
}

func testAppendIsAllOrNothing(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_1"))
	mustCreate(t, s, newRun("run_2"))
	mustAppend(t, s, "run_2", 1, frames(1, 3))
	// run_1's batch is fine, run_2's repeats seq 3: neither is written.
	err := s.AppendEvents(ctx, []store.Events{
		{Lease: leaseOf("run_1"), First: 1, Frames: frames(1, 5)},
		{Lease: leaseOf("run_2"), First: 3, Frames: frames(3, 2)},
	})
	if !errors.Is(err, store.ErrSeq) {
		t.Fatalf("a batch out of sequence: %v, want ErrSeq", err)
	}
	if _, last, _ := s.EventBounds(ctx, "run_1"); last != 0 {
		t.Errorf("run_1 has %d events after a failed append of two runs, want 0", last)
	}
	if _, last, _ := s.EventBounds(ctx, "run_2"); last != 3 {
		t.Errorf("run_2 has %d events, want 3", last)
	}
	// Two batches of one run in one call follow each other.
	err = s.AppendEvents(ctx, []store.Events{
		{Lease: leaseOf("run_1"), First: 1, Frames: frames(1, 2)},
		{Lease: leaseOf("run_2"), First: 4, Frames: frames(4, 1)},
		{Lease: leaseOf("run_1"), First: 3, Frames: frames(3, 2)},
	})
	if err != nil {
		t.Fatal(err)
	}
	fs, _ := s.ReadEvents(ctx, "run_1", 0, 10)
	if len(fs) != 4 || string(fs[3]) != "frame 4" {
		t.Errorf("run_1 after two batches in one call: %q", fs)
	}
}

func testAppendAfterFinish(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_1"))
	mustAppend(t, s, "run_1", 1, frames(1, 2))
	mustUpdate(t, s, leaseOf("run_1"), store.Update{Status: store.Finished})
	if err := s.AppendEvents(ctx, []store.Events{{Lease: leaseOf("run_1"), First: 3, Frames: frames(3, 1)}}); !errors.Is(err, store.ErrFinished) {
		t.Errorf("AppendEvents to a finished run: %v, want ErrFinished", err)
	}
	if fs, err := s.ReadEvents(ctx, "run_1", 0, 10); err != nil || len(fs) != 2 {
		t.Errorf("a finished run's journal: %d frames, %v; want 2", len(fs), err)
	}
}

func testConcurrentAppends(t *testing.T, s store.Store) {
	ctx := t.Context()
	const runs, batches, per = 8, 20, 16
	for r := range runs {
		mustCreate(t, s, newRun(fmt.Sprintf("run_%d", r)))
	}
	var wg sync.WaitGroup
	for r := range runs {
		wg.Go(func() {
			id := fmt.Sprintf("run_%d", r)
			for b := range batches {
				if err := s.AppendEvents(ctx, []store.Events{{Lease: leaseOf(id), First: int64(b*per + 1), Frames: frames(b*per+1, per)}}); err != nil {
					t.Errorf("%s batch %d: %v", id, b, err)
					return
				}
			}
		})
	}
	wg.Wait()
	for r := range runs {
		fs, err := s.ReadEvents(ctx, fmt.Sprintf("run_%d", r), 0, runs*batches*per)
		if err != nil || len(fs) != batches*per {
			t.Fatalf("run_%d: %d frames, %v", r, len(fs), err)
		}
		for i, f := range fs {
			if string(f) != fmt.Sprintf("frame %d", i+1) {
				t.Fatalf("run_%d frame %d = %q", r, i+1, f)
			}
		}
	}
}

func testInputs(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_1"))
	in := store.Input{RunID: "run_1", Key: "k1", Digest: []byte("d1"), Request: []byte("r1")}
	first, created, err := s.PutInput(ctx, in)
	if err != nil || !created || first.Key != "k1" || string(first.Digest) != "d1" || string(first.Request) != "r1" || first.Order <= 0 || first.Answer != nil {
		t.Fatalf("PutInput: %+v, %v, %v", first, created, err)
	}
	again := in
	again.Digest, again.Request = []byte("other"), []byte("other")
	got, created, err := s.PutInput(ctx, again)
	if err != nil || created || string(got.Digest) != "d1" || string(got.Request) != "r1" || got.Order != first.Order {
		t.Errorf("PutInput of a key taken: %+v, created %v, %v; want the first input back", got, created, err)
	}
	if err := s.AnswerInput(ctx, "run_1", "k1", []byte("ack")); err != nil {
		t.Fatal(err)
	}
	got, _, _ = s.PutInput(ctx, in)
	if string(got.Answer) != "ack" {
		t.Errorf("the answered input came back with answer %q", got.Answer)
	}
	if _, _, err := s.PutInput(ctx, store.Input{RunID: "run_nope", Key: "k1"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutInput for an unknown run: %v, want ErrNotFound", err)
	}
	if err := s.AnswerInput(ctx, "run_1", "k_nope", []byte("x")); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AnswerInput of an unknown key: %v, want ErrNotFound", err)
	}
	got, err = s.GetInput(ctx, "run_1", "k1")
	// Answered, an input keeps what its retries need, not its request: refused inputs
	// of megabytes each, kept whole, once held a store's memory past its bound.
	if err != nil || string(got.Digest) != "d1" || len(got.Request) != 0 || string(got.Answer) != "ack" || got.Order != first.Order {
		t.Errorf("GetInput = %+v, %v; want k1 as put, answered ack, its request let go", got, err)
	}
	for _, k := range [][2]string{{"run_1", "k_nope"}, {"run_nope", "k1"}} {
		if _, err := s.GetInput(ctx, k[0], k[1]); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("GetInput(%s, %s): %v, want ErrNotFound", k[0], k[1], err)
		}
	}
	// The same key on another run is another input.
	mustCreate(t, s, newRun("run_2"))
	if _, created, err := s.PutInput(ctx, store.Input{RunID: "run_2", Key: "k1", Digest: []byte("d")}); err != nil || !created {
		t.Errorf("key k1 on another run: created %v, %v", created, err)
	}
	// Racing puts of one key: one is created, every other gets it.
	var wg sync.WaitGroup
	var mu sync.Mutex
	createdN := 0
	for i := range 20 {
		wg.Go(func() {
			got, created, err := s.PutInput(ctx, store.Input{RunID: "run_1", Key: "race", Digest: fmt.Appendf(nil, "%d", i)})
			if err != nil {
				t.Errorf("racing PutInput: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if created {
				createdN++
			} else if got.Key != "race" {
				t.Errorf("racing PutInput returned %+v", got)
			}
		})
	}
	wg.Wait()
	if createdN != 1 {
		t.Errorf("%d of 20 racing puts of one key created it, want 1", createdN)
	}
}

func testThreads(t *testing.T, s store.Store) {
	ctx := t.Context()
	th := store.Thread{ID: "thread_1", Owner: "token:a", Agent: "demo"}
	if err := s.CreateThread(ctx, th); err != nil {
		t.Fatal(err)
	}
	if err := s.CreateThread(ctx, th); !errors.Is(err, store.ErrExists) {
		t.Errorf("CreateThread of an existing id: %v, want ErrExists", err)
	}
	got, err := s.GetThread(ctx, "thread_1")
	if err != nil || got.Owner != "token:a" || got.Agent != "demo" || got.Messages != 0 || got.ActiveRunID != "" || got.CreatedAt.IsZero() {
		t.Fatalf("GetThread = %+v, %v", got, err)
	}
	mustCreate(t, s, newRun("run_1"))
	mustCreate(t, s, newRun("run_2"))
	created := got.UpdatedAt
	time.Sleep(2 * time.Millisecond)
	if err := s.AppendMessages(ctx, "thread_1", leaseOf("run_1"), [][]byte{[]byte("hello"), []byte("hi there")}); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendMessages(ctx, "thread_1", leaseOf("run_2"), [][]byte{[]byte("again")}); err != nil {
		t.Fatal(err)
	}
	// A run's messages are added once: its append done again (by the replica that took
	// it up) adds nothing.
	if err := s.AppendMessages(ctx, "thread_1", leaseOf("run_2"), [][]byte{[]byte("again")}); err != nil {
		t.Fatalf("AppendMessages of a run's messages again: %v", err)
	}
	got, _ = s.GetThread(ctx, "thread_1")
	if got.Messages != 3 || got.Bytes != int64(len("hello")+len("hi there")+len("again")) || !got.UpdatedAt.After(created) {
		t.Errorf("after appends: %+v", got)
	}
	msgs, err := s.ThreadMessages(ctx, "thread_1", 1, 10)
	if err != nil || len(msgs) != 2 || msgs[0].Index != 1 || string(msgs[0].Data) != "hi there" || msgs[0].RunID != "run_1" || msgs[1].Index != 2 || msgs[1].RunID != "run_2" {
		t.Errorf("ThreadMessages(from 1) = %+v, %v", msgs, err)
	}
	if msgs, _ := s.ThreadMessages(ctx, "thread_1", 0, 1); len(msgs) != 1 || string(msgs[0].Data) != "hello" {
		t.Errorf("ThreadMessages(from 0, limit 1) = %+v", msgs)
	}
	// The active run is the thread's unfinished exclusive run.
	r := newRun("run_3")
	r.ThreadID, r.Exclusive = "thread_1", true
	mustCreate(t, s, r)
	if got, _ := s.GetThread(ctx, "thread_1"); got.ActiveRunID != "run_3" {
		t.Errorf("ActiveRunID %q, want run_3", got.ActiveRunID)
	}
	mustUpdate(t, s, leaseOf("run_3"), store.Update{Status: store.Finished})
	if got, _ := s.GetThread(ctx, "thread_1"); got.ActiveRunID != "" {
		t.Errorf("ActiveRunID %q once the run finished, want none", got.ActiveRunID)
	}
	if err := s.AppendMessages(ctx, "thread_nope", leaseOf("run_1"), [][]byte{[]byte("x")}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("AppendMessages to an unknown thread: %v, want ErrNotFound", err)
	}
	if err := s.DeleteThread(ctx, "thread_1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetThread(ctx, "thread_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetThread of a deleted thread: %v", err)
	}
	if msgs, err := s.ThreadMessages(ctx, "thread_1", 0, 10); len(msgs) != 0 || (err != nil && !errors.Is(err, store.ErrNotFound)) {
		t.Errorf("messages of a deleted thread: %d, %v", len(msgs), err)
	}
	if err := s.DeleteThread(ctx, "thread_1"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("DeleteThread twice: %v, want ErrNotFound", err)
	}
	// Its runs stay.
	if _, err := s.GetRun(ctx, "run_3"); err != nil {
		t.Errorf("the deleted thread's run: %v", err)
	}
}

func testListThreads(t *testing.T, s store.Store) {
	ctx := t.Context()
	for i := range 7 {
		owner := "token:a"
		if i%3 == 2 {
			owner = "token:b"
		}
		if err := s.CreateThread(ctx, store.Thread{ID: fmt.Sprintf("thread_%d", i), Owner: owner, Agent: "demo"}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * time.Millisecond)
	}
	// thread_0 is updated last: it comes first.
	mustCreate(t, s, newRun("run_1"))
	if err := s.AppendMessages(ctx, "thread_0", leaseOf("run_1"), [][]byte{[]byte("hi")}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	after := ""
	for page := 0; ; page++ {
		ts, err := s.ListThreads(ctx, "token:a", after, 2)
		if err != nil {
			t.Fatal(err)
		}
		if len(ts) == 0 {
			break
		}
		if len(ts) > 2 || page > 5 {
			t.Fatalf("page %d has %d threads", page, len(ts))
		}
		for _, th := range ts {
			ids = append(ids, th.ID)
			if th.Owner != "token:a" {
				t.Errorf("another owner's thread listed: %+v", th)
			}
		}
		after = ts[len(ts)-1].ID
	}
	if !slices.Equal(ids, []string{"thread_0", "thread_6", "thread_4", "thread_3", "thread_1"}) {
		t.Errorf("token:a's threads, page by page: %v", ids)
	}
	if ts, err := s.ListThreads(ctx, "token:c", "", 10); err != nil || len(ts) != 0 {
		t.Errorf("a caller with no threads: %v, %v", ts, err)
	}
}

func testGrants(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"thread_1", "thread_2"} {
		if err := s.CreateThread(ctx, store.Thread{ID: id, Owner: "token:a", Agent: "demo"}); err != nil {
			t.Fatal(err)
		}
	}
	args := `{"path":"/tmp"}`
	sum := sha256.Sum256([]byte(args))
	// Put in an order that is not their ids': oldest first is the order they came in.
	exact := store.Grant{ID: "grant_b", ThreadID: "thread_1", Agent: "demo", Tool: "read_file",
		ArgumentsHash: sum[:], Arguments: args, RunID: "run_1", ApprovalID: "approval_1"}
	anyArgs := store.Grant{ID: "grant_a", ThreadID: "thread_1", Agent: "demo", Tool: "search",
		RunID: "run_2", ApprovalID: "approval_2"}
	before := time.Now().Add(-time.Minute)
	for _, g := range []store.Grant{exact, anyArgs} {
		if err := s.PutGrant(ctx, g); err != nil {
			t.Fatalf("PutGrant(%s): %v", g.ID, err)
		}
	}
	after := time.Now().Add(time.Minute)
	wantGrants(t, s, "thread_1", before, after, exact, anyArgs)

	if err := s.PutGrant(ctx, store.Grant{ID: "grant_c", ThreadID: "thread_nope", Tool: "search"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("PutGrant on an unknown thread: %v, want ErrNotFound", err)
	}
	if gs, err := s.Grants(ctx, "thread_nope"); err != nil || len(gs) != 0 {
		t.Errorf("Grants of an unknown thread: %+v, %v; want none", gs, err)
	}
	// The id the refused grant named is free. A hash that is empty, not nil, comes
	// back empty: it matches no arguments, and must not become a grant of any.
	empty := store.Grant{ID: "grant_c", ThreadID: "thread_2", Agent: "demo", Tool: "search", ArgumentsHash: []byte{}, Arguments: "?"}
	if err := s.PutGrant(ctx, empty); err != nil {
		t.Fatalf("PutGrant(grant_c) on thread_2: %v", err)
	}
	wantGrants(t, s, "thread_2", before, after, empty)

	// Ids are unique among all threads' grants.
	if err := s.PutGrant(ctx, exact); !errors.Is(err, store.ErrExists) {
		t.Errorf("PutGrant of an existing id: %v, want ErrExists", err)
	}
	elsewhere := anyArgs
	elsewhere.ThreadID = "thread_2"
	if err := s.PutGrant(ctx, elsewhere); !errors.Is(err, store.ErrExists) {
		t.Errorf("PutGrant of an id another thread has: %v, want ErrExists", err)
	}
	wantGrants(t, s, "thread_1", before, after, exact, anyArgs)
	wantGrants(t, s, "thread_2", before, after, empty)

	// A grant is revoked on its thread alone.
	if err := s.RevokeGrant(ctx, "thread_2", "grant_b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeGrant on another thread: %v, want ErrNotFound", err)
	}
	if err := s.RevokeGrant(ctx, "thread_nope", "grant_b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeGrant on an unknown thread: %v, want ErrNotFound", err)
	}
	wantGrants(t, s, "thread_1", before, after, exact, anyArgs)
	if err := s.RevokeGrant(ctx, "thread_1", "grant_b"); err != nil {
		t.Fatalf("RevokeGrant: %v", err)
	}
	wantGrants(t, s, "thread_1", before, after, anyArgs)
	if err := s.RevokeGrant(ctx, "thread_1", "grant_b"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("RevokeGrant twice: %v, want ErrNotFound", err)
	}
	wantGrants(t, s, "thread_2", before, after, empty)

	// A thread's grants go with it: a thread made anew with its id has none, and their
	// ids are free.
	if err := s.DeleteThread(ctx, "thread_1"); err != nil {
		t.Fatal(err)
	}
	if gs, err := s.Grants(ctx, "thread_1"); err != nil || len(gs) != 0 {
		t.Errorf("Grants of a deleted thread: %+v, %v; want none", gs, err)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_1", Owner: "token:a", Agent: "demo"}); err != nil {
		t.Fatal(err)
	}
	wantGrants(t, s, "thread_1", before, after)
	if err := s.PutGrant(ctx, anyArgs); err != nil {
		t.Errorf("PutGrant of the id of a deleted thread's grant: %v", err)
	}

	// And with a thread that retention removes.
	later := time.Now().Add(time.Hour)
	if runs, threads, err := s.Sweep(ctx, time.Time{}, later); err != nil || runs != 0 || threads != 2 {
		t.Fatalf("Sweep = %d runs, %d threads, %v; want 0, 2", runs, threads, err)
	}
	if err := s.CreateThread(ctx, store.Thread{ID: "thread_2", Owner: "token:a", Agent: "demo"}); err != nil {
		t.Fatal(err)
	}
	wantGrants(t, s, "thread_2", before, after)
	if err := s.PutGrant(ctx, empty); err != nil {
		t.Errorf("PutGrant of the id of a swept thread's grant: %v", err)
	}
}

// wantGrants checks that Grants returns want for thread, in order, each created
// between before and after and none before the one ahead of it.
func wantGrants(t *testing.T, s store.Store, thread string, before, after time.Time, want ...store.Grant) {
	t.Helper()
	got, err := s.Grants(t.Context(), thread)
	if err != nil {
		t.Fatalf("Grants(%s): %v", thread, err)
	}
	if len(got) != len(want) {
		t.Fatalf("Grants(%s) = %+v, want %+v", thread, got, want)
	}
	for i, g := range got {
		if g.CreatedAt.Before(before) || g.CreatedAt.After(after) {
			t.Errorf("Grants(%s)[%d] created at %v, want about now", thread, i, g.CreatedAt)
		}
		if i > 0 && g.CreatedAt.Before(got[i-1].CreatedAt) {
			t.Errorf("Grants(%s)[%d] created at %v, before the one ahead of it at %v", thread, i, g.CreatedAt, got[i-1].CreatedAt)
		}
		// DeepEqual tells a nil hash (any arguments) from an empty one.
		g.CreatedAt = time.Time{}
		if !reflect.DeepEqual(g, want[i]) {
			t.Errorf("Grants(%s)[%d] = %#v, want %#v", thread, i, g, want[i])
		}
	}
}

func testSweep(t *testing.T, s store.Store) {
	ctx := t.Context()
	for _, id := range []string{"run_old", "run_new", "run_going"} {
		mustCreate(t, s, newRun(id))
		mustAppend(t, s, id, 1, frames(1, 3))
		if _, _, err := s.PutInput(ctx, store.Input{RunID: id, Key: "k", Digest: []byte("d")}); err != nil {
			t.Fatal(err)
		}
	}
	s.CreateThread(ctx, store.Thread{ID: "thread_old", Owner: "token:a"})
	if err := s.AppendMessages(ctx, "thread_old", leaseOf("run_old"), [][]byte{[]byte("m")}); err != nil {
		t.Fatal(err)
	}
	mustUpdate(t, s, leaseOf("run_old"), store.Update{Status: store.Finished})
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()
	time.Sleep(20 * time.Millisecond)
	mustUpdate(t, s, leaseOf("run_new"), store.Update{Status: store.Finished})
	s.CreateThread(ctx, store.Thread{ID: "thread_new", Owner: "token:a"})

	runs, threads, err := s.Sweep(ctx, cut, cut)
	if err != nil || runs != 1 || threads != 1 {
		t.Fatalf("Sweep = %d runs, %d threads, %v; want 1, 1", runs, threads, err)
	}
	if _, err := s.GetRun(ctx, "run_old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the run finished before the cut: %v, want it gone", err)
	}
	if _, err := s.ReadEvents(ctx, "run_old", 0, 10); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("its journal: %v, want it gone", err)
	}
	for _, id := range []string{"run_new", "run_going"} {
		if fs, err := s.ReadEvents(ctx, id, 0, 10); err != nil || len(fs) != 3 {
			t.Errorf("%s after the sweep: %d frames, %v", id, len(fs), err)
		}
	}
	if _, err := s.GetThread(ctx, "thread_old"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("the thread idle since before the cut: %v, want it gone", err)
	}
	if _, err := s.GetThread(ctx, "thread_new"); err != nil {
		t.Errorf("the thread made after the cut: %v", err)
	}
	if runs, threads, err := s.Sweep(ctx, cut, cut); err != nil || runs+threads != 0 {
		t.Errorf("a second sweep removed %d runs and %d threads, %v", runs, threads, err)
	}
}

// child is a run started by the call callID of parent, in the tree of root.
func child(id, parent, callID, root string, depth int) store.Run {
	r := newRun(id)
	r.ParentRunID, r.ParentCallID, r.RootRunID, r.Depth = parent, callID, root, depth
	return r
}

func testChildRuns(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_root"))
	mustCreate(t, s, child("run_c1", "run_root", "call_1", "run_root", 1))
	time.Sleep(2 * time.Millisecond) // created_at orders them
	mustCreate(t, s, child("run_c2", "run_root", "call_2", "run_root", 1))
	mustCreate(t, s, child("run_g1", "run_c1", "call_9", "run_root", 2))

	got, err := s.GetRun(ctx, "run_g1")
	if err != nil || got.ParentRunID != "run_c1" || got.ParentCallID != "call_9" || got.RootRunID != "run_root" || got.Depth != 2 {
		t.Errorf("GetRun(run_g1) = %+v, %v; want its parent, call, root and depth", got, err)
	}
	if root, err := s.GetRun(ctx, "run_root"); err != nil || root.ParentRunID != "" || root.RootRunID != "" || root.Depth != 0 {
		t.Errorf("GetRun(run_root) = %+v, %v; want no lineage", root, err)
	}
	ids := func(rs []store.Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	kids, err := s.ChildRuns(ctx, "run_root")
	if err != nil || !slices.Equal(ids(kids), []string{"run_c1", "run_c2"}) || kids[1].ParentCallID != "call_2" {
		t.Errorf("ChildRuns(run_root) = %v, %v; want run_c1, run_c2, oldest first", ids(kids), err)
	}
	if kids, err := s.ChildRuns(ctx, "run_c1"); err != nil || !slices.Equal(ids(kids), []string{"run_g1"}) {
		t.Errorf("ChildRuns(run_c1) = %v, %v; want run_g1", ids(kids), err)
	}
	for _, id := range []string{"run_c2", "run_nope", ""} {
		if kids, err := s.ChildRuns(ctx, id); err != nil || len(kids) != 0 {
			t.Errorf("ChildRuns(%q) = %v, %v; want none", id, ids(kids), err)
		}
	}
	// Claims keep what CreateRun recorded.
	r, err := s.Claim(ctx, "run_g1", "replica_b", lease, true)
	if err != nil || r.ParentRunID != "run_c1" || r.RootRunID != "run_root" || r.Depth != 2 {
		t.Errorf("Claim(run_g1) = %+v, %v; want its lineage kept", r, err)
	}
	if left, err := s.UnfinishedRuns(ctx); err != nil || len(left) != 4 || left[3].ParentCallID != "call_9" {
		t.Errorf("UnfinishedRuns = %v, %v; want the four runs, lineage and all", ids(left), err)
	}
}

// A child finished long ago stays while its root is kept, and goes with it.
func testSweepKeepsTrees(t *testing.T, s store.Store) {
	ctx := t.Context()
	mustCreate(t, s, newRun("run_root"))
	mustCreate(t, s, child("run_c", "run_root", "call_1", "run_root", 1))
	mustCreate(t, s, newRun("run_other"))
	mustCreate(t, s, child("run_oc", "run_other", "call_1", "run_other", 1))
	mustUpdate(t, s, leaseOf("run_c"), store.Update{Status: store.Finished})
	mustUpdate(t, s, leaseOf("run_oc"), store.Update{Status: store.Finished})
	mustUpdate(t, s, leaseOf("run_other"), store.Update{Status: store.Finished})
	time.Sleep(20 * time.Millisecond)
	cut := time.Now()

	// run_root is unfinished: its child stays. run_other's tree goes whole.
	if runs, _, err := s.Sweep(ctx, cut, time.Time{}); err != nil || runs != 2 {
		t.Fatalf("Sweep = %d runs, %v; want 2, run_other and its child", runs, err)
	}
	if _, err := s.GetRun(ctx, "run_c"); err != nil {
		t.Errorf("the child of an unfinished root: %v, want it kept", err)
	}
	for _, id := range []string{"run_other", "run_oc"} {
		if _, err := s.GetRun(ctx, id); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("%s: %v, want it gone", id, err)
		}
	}
	// The root finishes now, after the cut: its child still stays.
	mustUpdate(t, s, leaseOf("run_root"), store.Update{Status: store.Finished})
	if runs, _, err := s.Sweep(ctx, cut, time.Time{}); err != nil || runs != 0 {
		t.Errorf("Sweep = %d runs, %v; want none while the root is newer than the cut", runs, err)
	}
	time.Sleep(20 * time.Millisecond)
	if runs, _, err := s.Sweep(ctx, time.Now(), time.Time{}); err != nil || runs != 2 {
		t.Errorf("Sweep = %d runs, %v; want the root and its child", runs, err)
	}
}

func testContextDone(t *testing.T, s store.Store) {
	mustCreate(t, s, newRun("run_1"))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.GetRun(ctx, "run_1"); !errors.Is(err, context.Canceled) {
		t.Errorf("GetRun with a done context: %v, want context.Canceled", err)
	}
	if err := s.AppendEvents(ctx, []store.Events{{Lease: leaseOf("run_1"), First: 1, Frames: frames(1, 1)}}); !errors.Is(err, context.Canceled) {
		t.Errorf("AppendEvents with a done context: %v, want context.Canceled", err)
	}
	if _, last, _ := s.EventBounds(t.Context(), "run_1"); last != 0 {
		t.Errorf("an append with a done context wrote %d events", last)
	}
}
