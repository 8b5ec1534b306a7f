package service_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/service"
	"github.com/agentd/agentd/service/runs"
	"github.com/agentd/agentd/service/store"
	"github.com/agentd/agentd/service/store/memory"
	"github.com/agentd/agentd/service/store/sqlite"
)

// steer sends a steer of text to run id with SendRunInput under key.
func steer(t *testing.T, c agentdv1.AgentServiceClient, id, key, text string) (*agentdv1.SendRunInputResponse, error) {
	t.Helper()
	return c.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: id, ClientKey: key,
		Input: &agentdv1.SendRunInputRequest_Steer{Steer: &agentdv1.Steer{Text: text}}})
}

// Steers sent to a parked run with SendRunInput, on every store: refused ones are not
// kept (150 refused steers of 3.9 MiB once took 631 MB against a 64 MiB store bound),
// the steer bound holds across the stretches the run parks and wakes in (14 steers of
// 300 KB were once taken against 1 MiB, and the park after them failed, ending the run
// with an empty continuation), and the run goes on to take its approval and finish:
// on SQLite, a single replica once refused every later input as "not going on on this
// server", the run parked until a restart.
func TestSendRunInput_SteersToAParkedRunAreBounded(t *testing.T) {
	for _, name := range []string{"memory", "sqlite"} {
		t.Run(name, func(t *testing.T) {
			var st store.Store
			var mem *memory.Store
			switch name {
			case "memory":
				mem = memory.New(memory.Options{})
				st = mem
			case "sqlite":
				s, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { s.Close() })
				st = s
			}
			srv := askerServer(t, service.Config{Config: runs.Config{Store: st, MaxQueuedSteerBytes: 1 << 20, SteerRate: 1000, SteerBurst: 1000}})
			runID, approvalID, _ := parkRun(t, srv)

			big := strings.Repeat("x", 3900<<10)
			for i := range 20 {
				resp, err := steer(t, srv.Client, runID, fmt.Sprintf("big-%d", i), big)
				if err != nil {
					t.Fatalf("big steer %d: %v", i, err)
				}
				if resp.GetAck().GetAccepted() || resp.GetAck().GetError().GetReason() != "STEER_QUEUE_FULL" {
					t.Fatalf("big steer %d: %v, want refused STEER_QUEUE_FULL", i, resp)
				}
			}
			if mem != nil {
				if n := mem.Bytes(); n > 4<<20 {
					t.Errorf("the store holds %d MiB after 20 refused steers of 3.9 MiB, want them not kept", n>>20)
				}
			}

			mid := strings.Repeat("y", 300<<10)
			accepted := 0
			for i := range 14 {
				resp, err := steer(t, srv.Client, runID, fmt.Sprintf("mid-%d", i), mid)
				if err != nil {
					t.Fatalf("steer %d of 300 KiB: %v", i, err)
				}
				if resp.GetAck().GetAccepted() {
					accepted++
				}
				// Let the run park again between steers: the bound holds across stretches.
				waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_PARKED)
			}
			if accepted > 3 {
				t.Errorf("%d steers of 300 KiB taken against a 1 MiB bound, want at most 3", accepted)
			}

			resp, err := srv.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: "ok",
				Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: approvalID, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}}})
			if err != nil || !resp.GetAck().GetAccepted() {
				t.Fatalf("the decision after the steers: %v, %v; want it taken", resp, err)
			}
			waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_FINISHED)
		})
	}
}

// Inputs sent at once to a run parked in a single replica's SQLite store all reach it:
// each wakes the run or finds it woken, and none is told the run is going on elsewhere
// (UNAVAILABLE, RUN_NOT_HERE), which left it parked until a restart.
func TestSendRunInput_AtOnceToAParkedRunOnSQLite(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "agentd.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := askerServer(t, service.Config{Config: runs.Config{Store: st, SteerRate: 1000, SteerBurst: 1000, ParkAfter: time.Millisecond}})
	runID, approvalID, _ := parkRun(t, srv)
	text := strings.Repeat("z", 200<<10)
	var wg sync.WaitGroup
	errs := make(chan error, 40)
	for i := range 40 {
		wg.Go(func() {
			if _, err := steer(t, srv.Client, runID, fmt.Sprintf("at-once-%d", i), text); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if status.Code(err) == codes.Unavailable {
			t.Errorf("a steer to the parked run: %v", err)
		}
	}
	resp, err := srv.Client.SendRunInput(t.Context(), &agentdv1.SendRunInputRequest{RunId: runID, ClientKey: "ok",
		Input: &agentdv1.SendRunInputRequest_ApprovalDecision{ApprovalDecision: &agentdv1.ApprovalDecision{ApprovalId: approvalID, Outcome: agentdv1.ApprovalOutcome_APPROVAL_OUTCOME_APPROVED}}})
	if err != nil || !resp.GetAck().GetAccepted() {
		t.Fatalf("the decision after the steers: %v, %v; want it taken", resp, err)
	}
	waitState(t, srv.Client, runID, agentdv1.RunState_RUN_STATE_FINISHED)
}

// sharedMemory is a memory store that says other replicas share it.
type sharedMemory struct{ *memory.Store }

func (sharedMemory) Shared() bool { return true }

// A SendRunInput for a run another replica holds, which never answers it, ends in
// bounded time UNAVAILABLE (INPUT_UNANSWERED), the input stored: it used to wait until
// the client's own deadline, though the run's holder may well have acted on it.
func TestSendRunInput_AnswersInBoundedTime(t *testing.T) {
	st := sharedMemory{memory.New(memory.Options{})}
	if err := st.CreateRun(t.Context(), store.Run{ID: "run_elsewhere", Holder: "ghost", Status: store.Running}, time.Hour); err != nil {
		t.Fatal(err)
	}
	srv := askerServer(t, service.Config{Config: runs.Config{Store: st, Replica: "here", InputAnswerTimeout: 300 * time.Millisecond}})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	began := time.Now()
	_, err := srv.Client.SendRunInput(ctx, &agentdv1.SendRunInputRequest{RunId: "run_elsewhere", ClientKey: "k",
		Input: &agentdv1.SendRunInputRequest_Steer{Steer: &agentdv1.Steer{Text: "hi"}}})
	if code, reason, _ := errorInfo(err); code != codes.Unavailable || reason != "INPUT_UNANSWERED" {
		t.Fatalf("SendRunInput: %v after %s, want UNAVAILABLE INPUT_UNANSWERED", err, time.Since(began))
	}
	if took := time.Since(began); took > 3*time.Second {
		t.Errorf("the refusal took %s, want about the 300ms bound", took)
	}
	if in, err := st.GetInput(t.Context(), "run_elsewhere", "k"); err != nil || len(in.Request) == 0 {
		t.Errorf("the input: %+v, %v; want it stored for the run's holder", in, err)
	}
}
