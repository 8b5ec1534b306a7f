package runs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/ids"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/service/runs/journal"
	"github.com/agentd/agentd/service/store"
)

// A thread is a conversation the server keeps (RunSpec.history THREAD): its runs send
// only their new input, and the history is the thread's messages. A run on a thread
// holds it (store.Run.Exclusive) from its start to its end, when its new messages are
// added to the thread: the start's messages, then run_finished's new_messages.

// threadPage is how many messages a store read of a thread takes at a time.
const threadPage = 500

// threadStart is what a start on a thread brings: the thread, and whether it is new.
type threadStart struct {
	id      string
	created bool
	input   []*agentdv1.Message // the start's own messages, added to the thread at the end
}

// withThread returns the spec a start on a thread runs: spec with the thread's messages
// as its history, ahead of its own. A start with history CLIENT is returned as it is.
func (s *Manager) withThread(ctx context.Context, mode Mode, spec *agentdv1.RunSpec, ct *opened) (*agentdv1.RunSpec, *threadStart, error) {
	switch spec.GetHistory() {
	case agentdv1.History_HISTORY_UNSPECIFIED, agentdv1.History_HISTORY_CLIENT:
		if spec.GetOnBusy() != agentdv1.OnBusy_ON_BUSY_UNSPECIFIED {
			return nil, nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "start.on_busy", Description: "applies to runs with history HISTORY_THREAD only"}})
		}
		return spec, nil, nil
	case agentdv1.History_HISTORY_THREAD:
	default:
		return nil, nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "start.history", Description: fmt.Sprintf("unknown value %d", spec.GetHistory())}})
	}
	switch onBusy := spec.GetOnBusy(); {
	case agentdv1.OnBusy_name[int32(onBusy)] == "":
		return nil, nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "start.on_busy", Description: fmt.Sprintf("unknown value %d", onBusy)}})
	case onBusy == agentdv1.OnBusy_ON_BUSY_STEER && mode == ModeExecute:
		return nil, nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "start.on_busy", Description: "ExecuteRun cannot attach to the thread's active run: use Run or StartRun"}})
	}
	id := spec.GetThreadId()
	if id == "" && ct != nil {
		id = ct.ThreadID
	}
	ts := &threadStart{id: id, input: spec.GetMessages()}
	if id == "" {
		ts.id, ts.created = ids.New("thread"), true
		eff := proto.CloneOf(spec)
		eff.ThreadId = ts.id
		return eff, ts, nil
	}
	th, err := s.settledThread(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	var history []*agentdv1.Message
	for from := int64(0); from < th.Messages; {
		msgs, err := s.store.ThreadMessages(ctx, id, from, threadPage)
		if err != nil {
			return nil, nil, storeStatus(err)
		}
		if len(msgs) == 0 {
			break
		}
		for _, m := range msgs {
			pm := &agentdv1.Message{}
			if err := proto.Unmarshal(m.Data, pm); err != nil {
				return nil, nil, statusError(Internal, reasonInternal, fmt.Sprintf("thread %s message %d does not decode: %v", id, m.Index, err), nil)
			}
			history = append(history, pm)
		}
		from = msgs[len(msgs)-1].Index + 1
	}
	eff := proto.CloneOf(spec)
	eff.ThreadId = id
	eff.Messages = append(history, spec.GetMessages()...)
	return eff, ts, nil
}

// thread returns the thread of id, if the caller owns it.
func (s *Manager) thread(ctx context.Context, id string) (store.Thread, error) {
	th, err := s.store.GetThread(ctx, id)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return store.Thread{}, threadNotFound(id)
	case err != nil:
		return store.Thread{}, storeStatus(err)
	case th.Owner != "" && th.Owner != s.identity(ctx):
		return store.Thread{}, threadNotFound(id)
	}
	return th, nil
}

// settledThread is thread, once the thread's active run, when it has sent its
// run_finished, is recorded as ended (waitEnding): a client that read run_finished and
// goes on with the thread (its next turn, its history) finds the run's messages there.
func (s *Manager) settledThread(ctx context.Context, id string) (store.Thread, error) {
	th, err := s.thread(ctx, id)
	if err == nil && th.ActiveRunID != "" && s.waitEnding(ctx, th.ActiveRunID) {
		th, err = s.thread(ctx, id)
	}
	return th, err
}

// waitEnding waits for run id, when this server runs it and the run has sent its
// run_finished, to be recorded as ended (its messages added to its thread, the thread
// no longer busy), and reports whether it waited. A client that starts a thread's next
// turn as soon as it reads run_finished finds the thread free and whole.
func (s *Manager) waitEnding(ctx context.Context, id string) bool {
	s.liveMu.Lock()
	ss := s.live[id]
	s.liveMu.Unlock()
	if ss == nil {
		return false
	}
	ss.mu.Lock()
	ended, done := ss.phase == phaseEnded, ss.done
	ss.mu.Unlock()
	if !ended || done == nil {
		return false
	}
	t := time.NewTimer(journal.StoreTimeout)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-ctx.Done():
	case <-t.C:
	}
	return false
}

func threadNotFound(id string) error {
	return statusError(NotFound, reasonThreadNotFound, "no thread "+strconv.Quote(id)+" of yours on this server: it never existed, was deleted or expired, or another caller owns it", map[string]string{"thread_id": id})
}

func threadBusy(id, active string) error {
	return statusError(Aborted, reasonThreadBusy, fmt.Sprintf("thread %s has an active run, %s: attach to it, wait for it to finish, or start with on_busy STEER", id, active), map[string]string{"thread_id": id, "active_run_id": active})
}

// addToThread adds a finished run's messages to its thread: the start's own, then the
// run's new ones.
func (s *Manager) addToThread(ctx context.Context, ss *session) error {
	var msgs [][]byte
	for _, m := range append(ss.threaded.input, ss.result.GetNewMessages()...) {
		b, err := proto.Marshal(m)
		if err != nil {
			return err
		}
		msgs = append(msgs, b)
	}
	if len(msgs) == 0 {
		return nil
	}
	return s.store.AppendMessages(ctx, ss.thread, ss.heldLease(), msgs)
}

// GetThread reads a page of a thread's messages, with its grants, for GetThread.
func (s *Manager) GetThread(ctx context.Context, id, pageToken string, size32 int32) (*agentdv1.GetThreadResponse, error) {
	from, err := pageIndex(pageToken)
	if err != nil {
		return nil, err
	}
	th, err := s.settledThread(ctx, id)
	if err != nil {
		return nil, err
	}
	size := pageSize(size32, 100)
	msgs, err := s.store.ThreadMessages(ctx, th.ID, from, size)
	if err != nil {
		return nil, storeStatus(err)
	}
	resp := &agentdv1.GetThreadResponse{Thread: threadToProto(th)}
	if resp.Thread.Grants, err = s.threadGrants(ctx, th.ID); err != nil {
		return nil, err
	}
	for _, m := range msgs {
		pm := &agentdv1.Message{}
		if err := proto.Unmarshal(m.Data, pm); err != nil {
			return nil, statusError(Internal, reasonInternal, fmt.Sprintf("thread %s message %d does not decode: %v", th.ID, m.Index, err), nil)
		}
		resp.Messages = append(resp.Messages, pm)
	}
	if n := len(msgs); n > 0 && msgs[n-1].Index+1 < th.Messages {
		resp.NextPageToken = "m" + strconv.FormatInt(msgs[n-1].Index+1, 10)
	}
	return resp, nil
}

// ListThreads lists a page of the caller's threads, for ListThreads.
func (s *Manager) ListThreads(ctx context.Context, pageToken string, size32 int32) (*agentdv1.ListThreadsResponse, error) {
	after := ""
	if pageToken != "" {
		var ok bool
		if after, ok = strings.CutPrefix(pageToken, "t"); !ok || after == "" {
			return nil, invalidPageToken()
		}
	}
	size := pageSize(size32, 50)
	ths, err := s.store.ListThreads(ctx, s.identity(ctx), after, size+1)
	if err != nil {
		return nil, storeStatus(err)
	}
	resp := &agentdv1.ListThreadsResponse{}
	if len(ths) > size {
		ths = ths[:size]
		resp.NextPageToken = "t" + ths[size-1].ID
	}
	for _, th := range ths {
		resp.Threads = append(resp.Threads, threadToProto(th))
	}
	return resp, nil
}

// DeleteThread deletes a thread that has no active run, for DeleteThread.
func (s *Manager) DeleteThread(ctx context.Context, id string) error {
	th, err := s.thread(ctx, id)
	if err != nil {
		return err
	}
	if th.ActiveRunID != "" {
		return threadBusy(th.ID, th.ActiveRunID)
	}
	if err := s.store.DeleteThread(ctx, th.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
		return storeStatus(err)
	}
	return nil
}

func threadToProto(th store.Thread) *agentdv1.Thread {
	return &agentdv1.Thread{
		ThreadId: th.ID, Agent: th.Agent, MessageCount: th.Messages, ActiveRunId: th.ActiveRunID,
		CreatedAt: timestamppb.New(th.CreatedAt), UpdatedAt: timestamppb.New(th.UpdatedAt),
	}
}

// pageSize is a request's page size: def when unset, at most 1000.
func pageSize(n int32, def int) int {
	switch {
	case n <= 0:
		return def
	case n > 1000:
		return 1000
	}
	return int(n)
}

// pageIndex decodes GetThread's page token: the index of the page's first message.
func pageIndex(tok string) (int64, error) {
	if tok == "" {
		return 0, nil
	}
	rest, ok := strings.CutPrefix(tok, "m")
	n, err := strconv.ParseInt(rest, 10, 64)
	if !ok || err != nil || n < 0 {
		return 0, invalidPageToken()
	}
	return n, nil
}

func invalidPageToken() error {
	return statusError(InvalidArgument, reasonInvalidPageToken, "page_token is not one this server gave: send the next_page_token of the previous page, or none", nil)
}

// threadSteer is a start's input on a thread that has an active run, with on_busy
// STEER: it goes to that run, and the stream attaches to it.
type threadSteer struct {
	thread string
	input  []*agentdv1.Message
	text   string
}

// steerBusy steers a start's input into its thread's active run and attaches the stream
// to that run from the first ack on: the stream's first events are attached, then the
// acks of the steers, then what follows. A run this server does not run, or that is
// ending, leaves the thread busy.
func (s *Manager) steerBusy(ctx context.Context, runID string, e *threadSteer, send func(journal.Frame) error) (*session, *journal.Outbox, error) {
	ref, err := s.lookup(ctx, runID)
	if err != nil || ref.ss == nil {
		return nil, nil, threadBusy(e.thread, runID)
	}
	var steers []*agentdv1.Steer
	for _, m := range e.input {
		steers = append(steers, &agentdv1.Steer{Message: m})
	}
	if e.text != "" {
		steers = append(steers, &agentdv1.Steer{Text: e.text})
	}
	if len(steers) == 0 {
		return nil, nil, invalidArgument(reasonInvalidArgument, wire.FieldErrors{{Field: "start.input", Description: "on_busy STEER needs input or messages to steer into the active run"}})
	}
	ss := ref.ss
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.phase == phaseEnded || ss.ctx.Err() != nil {
		return nil, nil, threadBusy(e.thread, runID)
	}
	after := ss.seq
	for _, st := range steers {
		ss.steerLocked(input{}, st)
	}
	oldest, _, err := s.store.EventBounds(ctx, ss.runID)
	if err != nil || ss.journal.Stored() == 0 {
		oldest = 1
	}
	o, err := ss.attachLocked(ctx, after, oldest, send)
	if err != nil {
		return nil, nil, err
	}
	return ss, o, nil
}
