// Package memory is the store agentd uses when no other is configured: everything in
// the process's memory, bounded, and gone with the process.
package memory

import (
	"cmp"
	"container/heap"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/internal/fence"
	"github.com/agentd/agentd/service/store/internal/watch"
)

// Options bound what the store holds.
type Options struct {
	// MaxRunBytes bounds one run's journal: past it the oldest events go (ReadEvents
	// below them gets ErrExpired). 0 means 8 MiB; more than 1 GiB is taken as 1 GiB.
	MaxRunBytes int64
	// MaxBytes bounds everything the store holds (journals, specs and checkpoints,
	// inputs, thread messages and grants). Past it the store lets go of what the owner
	// holding the most bytes keeps (by Run.Owner and Thread.Owner; the anonymous are one
	// owner): its finished runs that finished first, then its threads idle the longest,
	// one at a time and each time of the owner then holding the most. One owner's churn
	// so lets go of its own data before another's. A run going on never goes, though
	// it counts toward its owner's bytes. 0 means 64 MiB.
	MaxBytes int64
	// Now is the clock, leases' included; nil means time.Now.
	Now func() time.Time
}

// Store is a store.Store in memory. It is safe for concurrent use.
type Store struct {
	opts Options
	hub  *watch.Hub

	mu      sync.Mutex
	runs    map[string]*run
	threads map[string]*thread
	active  map[string]string // thread id → its unfinished exclusive run
	grants  map[string]string // grant id → its thread id
	bytes   int64             // what the runs and threads hold, counted as len of what they keep
	owned   map[string]int64  // owner → its part of bytes; no entry for an owner of none
	// replicas are the replicas that sent a Heartbeat, by id.
	replicas map[string]seenReplica
}

type run struct {
	rec store.Run
	// The run's journal, packed: every frame kept, back to back, in data from base on;
	// ends[i] is where the frame of seq first+i ends. One allocation holds many frames,
	// not one each, which is most of what a journal of small deltas would cost.
	first  int64
	data   []byte
	base   int
	ends   []int32
	size   int64 // len(data) - base
	inputs map[string]store.Input
	order  int64 // the Order of the run's last input
}

type thread struct {
	rec  store.Thread
	msgs []store.Message
	// grants are the thread's grants, oldest first; grantBytes is what they count for
	// MaxBytes, which Thread.Bytes leaves out.
	grants     []store.Grant
	grantBytes int64
}

var _ store.Store = (*Store)(nil)

// New returns an empty store.
func New(opts Options) *Store {
	if opts.MaxRunBytes <= 0 {
		opts.MaxRunBytes = 8 << 20
	}
	opts.MaxRunBytes = min(opts.MaxRunBytes, 1<<30) // a packed journal's offsets are 32-bit
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 64 << 20
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Store{opts: opts, hub: watch.NewHub(), runs: map[string]*run{}, threads: map[string]*thread{}, active: map[string]string{}, grants: map[string]string{}, owned: map[string]int64{}}
}

// lock takes the store's lock unless ctx is done.
func (s *Store) lock(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	return nil
}

func (s *Store) CreateRun(ctx context.Context, r store.Run, lease time.Duration) error {
	if r.Holder == "" {
		return errNoHolder
	}
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.runs[r.ID]; ok {
		return store.ErrExists
	}
	if r.Exclusive {
		if id := s.active[r.ThreadID]; id != "" {
			return &store.ThreadBusyError{RunID: id}
		}
		s.active[r.ThreadID] = r.ID
	}
	now := s.opts.Now()
	r.Status, r.LastSeq, r.Checkpoint = store.Running, 0, nil
	r.CreatedAt, r.FinishedAt = now, time.Time{}
	r.Epoch, r.LeaseUntil, r.WakeAt = 1, now.Add(lease), time.Time{}
	r.Spec = slices.Clone(r.Spec)
	s.runs[r.ID] = &run{rec: r, first: 1, inputs: map[string]store.Input{}}
	s.grewLocked(r.Owner, int64(len(r.Spec)))
	return nil
}

func (s *Store) GetRun(ctx context.Context, id string) (store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[id]
	if r == nil {
		return store.Run{}, store.ErrNotFound
	}
	return r.rec, nil
}

func (s *Store) UpdateRun(ctx context.Context, l store.Lease, u store.Update) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r, err := s.heldLocked(l)
	if err != nil {
		return err
	}
	r.rec.Status, r.rec.WakeAt = u.Status, u.WakeAt
	if u.Checkpoint != nil {
		s.grewLocked(r.rec.Owner, int64(len(u.Checkpoint)-len(r.rec.Checkpoint)))
		r.rec.Checkpoint = slices.Clone(u.Checkpoint)
	}
	now := s.opts.Now()
	if u.Status == store.Finished {
		r.rec.FinishedAt = now
		s.freeThreadLocked(r)
	}
	if u.Status == store.Finished || u.Release {
		r.rec.Holder, r.rec.LeaseUntil = "", now
	}
	s.hub.Notify(l.RunID)
	if u.Status != store.Running && cap(r.data) > len(r.data)+len(r.data)/8 {
		// Nothing more is appended for a while, or ever: the room append kept goes.
		r.data = slices.Clip(slices.Clone(r.data))
	}
	return nil
}

// heldLocked returns the run l holds: ErrNotFound, ErrFinished or ErrFenced if none.
func (s *Store) heldLocked(l store.Lease) (*run, error) {
	r := s.runs[l.RunID]
	switch {
	case r == nil:
		return nil, store.ErrNotFound
	case r.rec.Status == store.Finished:
		return nil, store.ErrFinished
	case !fence.Holds(r.rec.Holder, r.rec.Epoch, l):
		return nil, store.ErrFenced
	}
	return r, nil
}

func (s *Store) UnfinishedRuns(ctx context.Context) ([]store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Run
	for _, r := range s.runs {
		if r.rec.Status != store.Finished {
			out = append(out, r.rec)
		}
	}
	slices.SortFunc(out, func(a, b store.Run) int { return a.CreatedAt.Compare(b.CreatedAt) })
	return out, nil
}

// ChildRuns implements [store.Store].
func (s *Store) ChildRuns(ctx context.Context, parentID string) ([]store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Run
	for _, r := range s.runs {
		if parentID != "" && r.rec.ParentRunID == parentID {
			out = append(out, r.rec)
		}
	}
	slices.SortFunc(out, func(a, b store.Run) int { return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID)) })
	return out, nil
}

// errNoHolder is the error of a CreateRun or Claim that names no holder.
var errNoHolder = errors.New("memory: a run's holder must be named")

func (s *Store) Claim(ctx context.Context, id, holder string, lease time.Duration, force bool) (store.Run, error) {
	if holder == "" {
		return store.Run{}, errNoHolder
	}
	if err := s.lock(ctx); err != nil {
		return store.Run{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[id]
	now := s.opts.Now()
	switch {
	case r == nil:
		return store.Run{}, store.ErrNotFound
	case r.rec.Status == store.Finished:
		return store.Run{}, store.ErrFinished
	case !force && r.rec.Holder != holder && r.live(now):
		return store.Run{}, store.ErrHeld
	}
	r.rec.Holder, r.rec.Epoch, r.rec.LeaseUntil = holder, r.rec.Epoch+1, now.Add(lease)
	s.hub.Notify(id)
	return r.rec, nil
}

// live reports whether a replica holds r at now.
func (r *run) live(now time.Time) bool {
	return r.rec.Holder != "" && !r.rec.LeaseUntil.Before(now)
}

func (s *Store) Renew(ctx context.Context, held []store.Lease, lease time.Duration) ([]string, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	until := s.opts.Now().Add(lease)
	var lost []string
	for _, l := range held {
		r, err := s.heldLocked(l)
		if err != nil {
			lost = append(lost, l.RunID)
			continue
		}
		r.rec.LeaseUntil = until
	}
	return lost, nil
}

func (s *Store) Claimable(ctx context.Context, limit int) ([]store.Run, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.opts.Now()
	var out []store.Run
	for _, r := range s.runs {
		if r.needsHolder(now) {
			out = append(out, r.rec)
		}
	}
	slices.SortFunc(out, func(a, b store.Run) int {
		return cmp.Or(a.LeaseUntil.Compare(b.LeaseUntil), cmp.Compare(a.ID, b.ID))
	})
	return out[:min(max(limit, 0), len(out))], nil
}

func (s *Store) Heartbeat(ctx context.Context, r store.Replica, alive time.Duration) ([]store.Replica, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.opts.Now()
	if s.replicas == nil {
		s.replicas = map[string]seenReplica{}
	}
	s.replicas[r.ID] = seenReplica{r, now}
	var out []store.Replica
	for id, sr := range s.replicas {
		switch {
		case now.Sub(sr.at) <= alive:
			out = append(out, sr.Replica)
		case now.Sub(sr.at) > time.Hour:
			delete(s.replicas, id)
		}
	}
	slices.SortFunc(out, func(a, b store.Replica) int {
		return cmp.Or(a.StartedAt.Compare(b.StartedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// seenReplica is a replica and when its last Heartbeat came.
type seenReplica struct {
	store.Replica
	at time.Time
}

func (s *Store) ClaimNext(ctx context.Context, holder string, lease time.Duration, limit int, wakeAfter time.Duration) ([]store.Run, error) {
	if holder == "" {
		return nil, errNoHolder
	}
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	now := s.opts.Now()
	var next []*run
	for _, r := range s.runs {
		if r.needsHolder(now) && (r.hasInput() || r.rec.Status != store.Parked || !r.rec.WakeAt.After(now.Add(-wakeAfter))) {
			next = append(next, r)
		}
	}
	slices.SortFunc(next, func(a, b *run) int {
		return cmp.Or(a.rec.LeaseUntil.Compare(b.rec.LeaseUntil), cmp.Compare(a.rec.ID, b.rec.ID))
	})
	var out []store.Run
	var ids []string
	for _, r := range next[:min(max(limit, 0), len(next))] {
		r.rec.Holder, r.rec.Epoch, r.rec.LeaseUntil = holder, r.rec.Epoch+1, now.Add(lease)
		out = append(out, r.rec)
		ids = append(ids, r.rec.ID)
	}
	if len(ids) > 0 {
		s.hub.Notify(ids...)
	}
	return out, nil
}

// hasInput reports whether r has an unanswered input.
func (r *run) hasInput() bool {
	for _, in := range r.inputs {
		if in.Answer == nil {
			return true
		}
	}
	return false
}

// needsHolder reports whether r, held by none at now, needs a replica: it runs, or it
// is parked and due to wake or has an input to act on.
func (r *run) needsHolder(now time.Time) bool {
	switch {
	case r.rec.Status == store.Finished || r.live(now):
		return false
	case r.rec.Status == store.Running:
		return true
	case !r.rec.WakeAt.IsZero() && !r.rec.WakeAt.After(now):
		return true
	}
	for _, in := range r.inputs {
		if in.Answer == nil {
			return true
		}
	}
	return false
}

// AppendEvents copies the frames into the run's packed journal.
func (s *Store) AppendEvents(ctx context.Context, batches []store.Events) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	err := fence.CheckAppend(batches, func(id string) (fence.Run, error) {
		r := s.runs[id]
		if r == nil {
			return fence.Run{}, nil
		}
		return fence.Run{Found: true, Finished: r.rec.Status == store.Finished, Holder: r.rec.Holder, Epoch: r.rec.Epoch, LastSeq: r.rec.LastSeq}, nil
	})
	if err != nil {
		return err
	}
	ids := make([]string, 0, len(batches))
	for _, b := range batches {
		ids = append(ids, b.Lease.RunID)
		r := s.runs[b.Lease.RunID]
		var n int64
		for _, f := range b.Frames {
			n += int64(len(f))
		}
		if need := len(r.data) + int(n); need > cap(r.data) {
			// A quarter's room, not append's doubling: the bound counts bytes kept.
			grown := make([]byte, len(r.data), need+need/4)
			copy(grown, r.data)
			r.data = grown
		}
		n = 0
		for _, f := range b.Frames {
			r.data = append(r.data, f...)
			r.ends = append(r.ends, int32(len(r.data)))
			n += int64(len(f))
		}
		r.rec.LastSeq += int64(len(b.Frames))
		r.size += n
		s.grewLocked(r.rec.Owner, n)
		r.trim(s.opts.MaxRunBytes, s)
	}
	s.hub.Notify(ids...)
	return nil
}

// trim lets go of the run's oldest frames past max bytes, the newest always kept.
func (r *run) trim(max int64, s *Store) {
	dropped := 0
	for r.size > max && len(r.ends)-dropped > 1 {
		end := int(r.ends[dropped])
		n := int64(end - r.base)
		r.base = end
		r.size -= n
		s.grewLocked(r.rec.Owner, -n)
		dropped++
	}
	if dropped == 0 {
		return
	}
	r.ends = slices.Delete(r.ends, 0, dropped)
	r.first += int64(dropped)
	if r.base > len(r.data)/2 {
		// Most of the array is frames let go: keep only the rest. Frames a reader holds
		// still point into the old array, which stays theirs.
		rest := make([]byte, len(r.data)-r.base, cap(r.data)-r.base)
		copy(rest, r.data[r.base:])
		for i := range r.ends {
			r.ends[i] -= int32(r.base)
		}
		r.data, r.base = rest, 0
	}
}

// frame returns the frame at index i of the kept ones, capped so that an append to it
// cannot reach the next.
func (r *run) frame(i int) []byte {
	start := r.base
	if i > 0 {
		start = int(r.ends[i-1])
	}
	end := int(r.ends[i])
	return r.data[start:end:end]
}

func (s *Store) ReadNewEvents(ctx context.Context, after map[string]int64, limit int) (map[string][][]byte, error) {
	return store.ReadEach(ctx, after, limit, s.ReadEvents)
}

func (s *Store) ReadEvents(ctx context.Context, id string, after int64, limit int) ([][]byte, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	r := s.runs[id]
	if r == nil {
		return nil, store.ErrNotFound
	}
	if after+1 < r.first {
		return nil, store.ErrExpired
	}
	i := int(after + 1 - r.first)
	if i >= len(r.ends) {
		return nil, nil
	}
	end := min(len(r.ends), i+limit)
	out := make([][]byte, 0, end-i)
	for j := i; j < end; j++ {
		out = append(out, r.frame(j))
	}
	return out, nil
}

func (s *Store) EventBounds(ctx context.Context, id string) (oldest, last int64, err error) {
	if err := s.lock(ctx); err != nil {
		return 0, 0, err
	}
	defer s.mu.Unlock()
	r := s.runs[id]
	if r == nil {
		return 0, 0, store.ErrNotFound
	}
	return r.first, r.rec.LastSeq, nil
}

func (s *Store) PutInput(ctx context.Context, in store.Input) (store.Input, bool, error) {
	if err := s.lock(ctx); err != nil {
		return store.Input{}, false, err
	}
	defer s.mu.Unlock()
	r := s.runs[in.RunID]
	if r == nil {
		return store.Input{}, false, store.ErrNotFound
	}
	if got, ok := r.inputs[in.Key]; ok {
		return got, false, nil
	}
	r.order++
	in.Order = r.order
	in.Digest, in.Request, in.Answer = slices.Clone(in.Digest), slices.Clone(in.Request), slices.Clone(in.Answer)
	r.inputs[in.Key] = in
	s.grewLocked(r.rec.Owner, inputBytes(in))
	s.hub.Notify(store.InputPrefix + in.RunID)
	return in, true, nil
}

// inputBytes is what an input counts for MaxBytes.
func inputBytes(in store.Input) int64 {
	return int64(len(in.Key) + len(in.Digest) + len(in.Request) + len(in.Answer))
}

func (s *Store) AnswerInput(ctx context.Context, runID, key string, answer []byte) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return store.ErrNotFound
	}
	in, ok := r.inputs[key]
	if !ok {
		return store.ErrNotFound
	}
	// An answered input's request is done with: a retry needs its digest and answer.
	n := int64(len(answer) - len(in.Answer) - len(in.Request))
	in.Answer, in.Request = slices.Clone(answer), nil
	r.inputs[key] = in
	// Counted once the input is kept: a finished run let go for it takes all of it.
	s.grewLocked(r.rec.Owner, n)
	s.hub.Notify(runID)
	return nil
}

func (s *Store) GetInput(ctx context.Context, runID, key string) (store.Input, error) {
	if err := s.lock(ctx); err != nil {
		return store.Input{}, err
	}
	defer s.mu.Unlock()
	r := s.runs[runID]
	if r == nil {
		return store.Input{}, store.ErrNotFound
	}
	in, ok := r.inputs[key]
	if !ok {
		return store.Input{}, store.ErrNotFound
	}
	return in, nil
}

func (s *Store) PendingInputs(ctx context.Context, ids []string) ([]store.Input, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var out []store.Input
	for _, id := range ids {
		r := s.runs[id]
		if r == nil {
			continue
		}
		start := len(out)
		for _, in := range r.inputs {
			if in.Answer == nil {
				out = append(out, in)
			}
		}
		slices.SortFunc(out[start:], func(a, b store.Input) int { return cmp.Compare(a.Order, b.Order) })
	}
	return out, nil
}

func (s *Store) CreateThread(ctx context.Context, t store.Thread) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.threads[t.ID]; ok {
		return store.ErrExists
	}
	now := s.opts.Now()
	t.Messages, t.Bytes, t.CreatedAt, t.UpdatedAt, t.ActiveRunID = 0, 0, now, now, ""
	s.threads[t.ID] = &thread{rec: t}
	return nil
}

func (s *Store) GetThread(ctx context.Context, id string) (store.Thread, error) {
	if err := s.lock(ctx); err != nil {
		return store.Thread{}, err
	}
	defer s.mu.Unlock()
	t := s.threads[id]
	if t == nil {
		return store.Thread{}, store.ErrNotFound
	}
	rec := t.rec
	rec.ActiveRunID = s.active[id]
	return rec, nil
}

func (s *Store) ListThreads(ctx context.Context, owner, after string, limit int) ([]store.Thread, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	var all []store.Thread
	for _, t := range s.threads {
		if t.rec.Owner == owner {
			all = append(all, t.rec)
		}
	}
	slices.SortFunc(all, threadOrder)
	if after != "" {
		a := s.threads[after]
		if a == nil {
			return nil, nil
		}
		i, _ := slices.BinarySearchFunc(all, a.rec, threadOrder)
		for i < len(all) && all[i].ID == after {
			i++
		}
		all = all[i:]
	}
	return slices.Clone(all[:min(limit, len(all))]), nil
}

// threadOrder sorts threads most recently updated first, then by id.
func threadOrder(a, b store.Thread) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

func (s *Store) DeleteThread(ctx context.Context, id string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	t := s.threads[id]
	if t == nil {
		return store.ErrNotFound
	}
	s.dropThreadLocked(t)
	return nil
}

func (s *Store) dropThreadLocked(t *thread) {
	s.countLocked(t.rec.Owner, -(t.rec.Bytes + t.grantBytes))
	for _, g := range t.grants {
		delete(s.grants, g.ID)
	}
	delete(s.threads, t.rec.ID)
}

func (s *Store) AppendMessages(ctx context.Context, threadID string, l store.Lease, msgs [][]byte) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if r := s.runs[l.RunID]; r == nil || !fence.Holds(r.rec.Holder, r.rec.Epoch, l) {
		return store.ErrFenced
	}
	t := s.threads[threadID]
	if t == nil {
		return store.ErrNotFound
	}
	if len(t.msgs) > 0 && t.msgs[len(t.msgs)-1].RunID == l.RunID {
		return nil // the run's messages are in already
	}
	var n int64
	for _, m := range msgs {
		t.msgs = append(t.msgs, store.Message{Index: int64(len(t.msgs)), RunID: l.RunID, Data: slices.Clone(m)})
		n += int64(len(m))
	}
	t.rec.Bytes += n
	t.rec.Messages = int64(len(t.msgs))
	t.rec.UpdatedAt = s.opts.Now()
	// Counted once the thread is whole and updated now: what the bound lets go of
	// then is the thread with all its messages, and the threads idle longer go first.
	s.grewLocked(t.rec.Owner, n)
	return nil
}

func (s *Store) ThreadMessages(ctx context.Context, threadID string, from int64, limit int) ([]store.Message, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	t := s.threads[threadID]
	if t == nil {
		return nil, store.ErrNotFound
	}
	if from < 0 || from >= int64(len(t.msgs)) {
		return nil, nil
	}
	return slices.Clone(t.msgs[from:min(int64(len(t.msgs)), from+int64(limit))]), nil
}

// PutGrant implements [store.Store]. A grant changes nothing of its thread's record:
// not its Bytes, nor its UpdatedAt.
func (s *Store) PutGrant(ctx context.Context, g store.Grant) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	if _, ok := s.grants[g.ID]; ok {
		return store.ErrExists
	}
	t := s.threads[g.ThreadID]
	if t == nil {
		return store.ErrNotFound
	}
	g.ArgumentsHash = slices.Clone(g.ArgumentsHash) // nil stays nil: any arguments
	g.CreatedAt = s.opts.Now()
	t.grants = append(t.grants, g)
	s.grants[g.ID] = g.ThreadID
	n := grantBytes(g)
	t.grantBytes += n
	s.grewLocked(t.rec.Owner, n)
	return nil
}

// grantBytes is what a grant counts for MaxBytes.
func grantBytes(g store.Grant) int64 {
	return int64(len(g.ID) + len(g.Agent) + len(g.Tool) + len(g.ArgumentsHash) + len(g.Arguments) + len(g.RunID) + len(g.ApprovalID))
}

func (s *Store) Grants(ctx context.Context, threadID string) ([]store.Grant, error) {
	if err := s.lock(ctx); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	t := s.threads[threadID]
	if t == nil {
		return nil, nil
	}
	return slices.Clone(t.grants), nil
}

func (s *Store) RevokeGrant(ctx context.Context, threadID, id string) error {
	if err := s.lock(ctx); err != nil {
		return err
	}
	defer s.mu.Unlock()
	t := s.threads[threadID]
	if t == nil || s.grants[id] != threadID {
		return store.ErrNotFound
	}
	i := slices.IndexFunc(t.grants, func(g store.Grant) bool { return g.ID == id })
	n := grantBytes(t.grants[i])
	t.grants = slices.Delete(t.grants, i, i+1)
	t.grantBytes -= n
	s.countLocked(t.rec.Owner, -n)
	delete(s.grants, id)
	return nil
}

func (s *Store) Sweep(ctx context.Context, finishedBefore, idleBefore time.Time) (runs, threads int, err error) {
	if err := s.lock(ctx); err != nil {
		return 0, 0, err
	}
	defer s.mu.Unlock()
	old := func(r *run) bool { return r.rec.Status == store.Finished && r.rec.FinishedAt.Before(finishedBefore) }
	var drop []*run
	for _, r := range s.runs {
		// A child goes with its root: not while the root is kept.
		if root := s.runs[r.rec.RootRunID]; old(r) && (root == nil || old(root)) {
			drop = append(drop, r)
		}
	}
	for _, r := range drop {
		s.dropRunLocked(r)
		runs++
	}
	for _, t := range s.threads {
		if t.rec.UpdatedAt.Before(idleBefore) {
			s.dropThreadLocked(t)
			threads++
		}
	}
	return runs, threads, nil
}

func (s *Store) dropRunLocked(r *run) {
	n := r.size + int64(len(r.rec.Spec)+len(r.rec.Checkpoint))
	for _, in := range r.inputs {
		n += inputBytes(in)
	}
	s.countLocked(r.rec.Owner, -n)
	s.freeThreadLocked(r)
	delete(s.runs, r.rec.ID)
}

// freeThreadLocked lets go of r's thread, if r holds it.
func (s *Store) freeThreadLocked(r *run) {
	if r.rec.Exclusive && s.active[r.rec.ThreadID] == r.rec.ID {
		delete(s.active, r.rec.ThreadID)
	}
}

// countLocked counts n more bytes held for owner (fewer, for n < 0).
func (s *Store) countLocked(owner string, n int64) {
	s.bytes += n
	if b := s.owned[owner] + n; b != 0 {
		s.owned[owner] = b
	} else {
		delete(s.owned, owner)
	}
}

// grewLocked counts n more bytes held for owner, and past MaxBytes lets go of the
// finished runs, then the threads, of the owner holding the most, as MaxBytes says:
// never of a run going on.
func (s *Store) grewLocked(owner string, n int64) {
	s.countLocked(owner, n)
	if s.bytes <= s.opts.MaxBytes {
		return
	}
	// Finished runs go until the store is an eighth under its bound: a store at its
	// bound under load, where every append crosses it, then looks through its runs once
	// an eighth of the bound was appended, not at every append. Threads go only until
	// it is under its bound.
	low := s.opts.MaxBytes - s.opts.MaxBytes/8
	byOwner := map[string]*holding{}
	of := func(owner string) *holding {
		h := byOwner[owner]
		if h == nil {
			h = &holding{owner: owner}
			byOwner[owner] = h
		}
		return h
	}
	for _, r := range s.runs {
		if r.rec.Status == store.Finished {
			h := of(r.rec.Owner)
			h.runs = append(h.runs, r)
		}
	}
	for _, t := range s.threads {
		h := of(t.rec.Owner)
		h.threads = append(h.threads, t)
	}
	owners := make(holdings, 0, len(byOwner))
	for _, h := range byOwner {
		slices.SortFunc(h.runs, func(a, b *run) int { return a.rec.FinishedAt.Compare(b.rec.FinishedAt) })
		slices.SortFunc(h.threads, func(a, b *thread) int { return a.rec.UpdatedAt.Compare(b.rec.UpdatedAt) })
		h.bytes = s.owned[h.owner]
		owners = append(owners, h)
	}
	// A heap, not a scan of the owners at each run or thread let go: a store of many
	// small owners lets go of many things in one pass.
	heap.Init(&owners)
	for len(owners) > 0 {
		h := owners[0]
		switch {
		case len(h.runs) > 0:
			if s.bytes <= low {
				return
			}
			s.dropRunLocked(h.runs[0])
			h.runs = h.runs[1:]
		case len(h.threads) > 0:
			if s.bytes <= s.opts.MaxBytes {
				return
			}
			s.dropThreadLocked(h.threads[0])
			h.threads = h.threads[1:]
		default:
			heap.Pop(&owners)
			continue
		}
		h.bytes = s.owned[h.owner]
		heap.Fix(&owners, 0)
	}
}

// holding is what one owner may lose in a pass of grewLocked: its finished runs, the
// first to finish first, and its threads, idle the longest first.
type holding struct {
	owner   string
	bytes   int64 // the owner's part of Store.bytes
	runs    []*run
	threads []*thread
}

// holdings is a heap of owners, the one holding the most bytes on top.
type holdings []*holding

func (h holdings) Len() int { return len(h) }
func (h holdings) Less(i, j int) bool {
	return cmp.Or(cmp.Compare(h[j].bytes, h[i].bytes), cmp.Compare(h[i].owner, h[j].owner)) < 0
}
func (h holdings) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *holdings) Push(x any)   { *h = append(*h, x.(*holding)) }
func (h *holdings) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// Bytes returns what the store holds, as MaxBytes counts it.
func (s *Store) Bytes() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// Watch implements [store.Store]: f hears of the changes made through s.
func (s *Store) Watch(ctx context.Context, f func(ids []string)) { s.hub.Watch(ctx, f) }

// Close stops the watchers; the store's contents stay usable.
func (s *Store) Close() error {
	s.hub.Close()
	return nil
}
