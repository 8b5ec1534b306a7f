package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// parkedVersion is the version of the saved-run format agentctl writes and reads.
const parkedVersion = 1

// parkedRun is what agentctl saves of a parked run so that --resume can continue it: the
// transcript to send back (the history the run was started with, then its new messages),
// the signed continuation, and what the run waits for. A run on a thread the server keeps
// (History THREAD) is resumed with no transcript: the thread holds it.
type parkedRun struct {
	Agent                    string
	ThreadID                 string
	RunID                    string
	History                  agentdv1.History
	Reason                   agentdv1.RunEndReason
	Messages                 []*agentdv1.Message
	Continuation             []byte
	PendingApprovals         []*agentdv1.ApprovalRequested
	PendingClientToolCallIDs []string
	SavedAt                  time.Time
}

// parkedFile is parkedRun as JSON. Messages and approvals are protojson, as grpcurl and
// the --json events show them; continuation is base64.
type parkedFile struct {
	Version                  int               `json:"agentctl_parked_run"`
	SavedAt                  time.Time         `json:"saved_at"`
	Agent                    string            `json:"agent,omitempty"`
	ThreadID                 string            `json:"thread_id,omitempty"`
	RunID                    string            `json:"run_id,omitempty"`
	History                  string            `json:"history,omitempty"`
	Reason                   string            `json:"reason"`
	Messages                 []json.RawMessage `json:"messages"`
	Continuation             []byte            `json:"continuation"`
	PendingApprovals         []json.RawMessage `json:"pending_approvals,omitempty"`
	PendingClientToolCallIDs []string          `json:"pending_client_tool_call_ids,omitempty"`
}

// save writes p to path, readable by its owner alone (it holds the conversation), by way
// of a temporary file in the same folder so that a crash leaves the old file whole.
func (p *parkedRun) save(path string) error {
	f := parkedFile{
		Version:                  parkedVersion,
		SavedAt:                  p.SavedAt.UTC(),
		Agent:                    p.Agent,
		ThreadID:                 p.ThreadID,
		RunID:                    p.RunID,
		Reason:                   p.Reason.String(),
		History:                  historyName(p.History),
		Continuation:             p.Continuation,
		PendingClientToolCallIDs: p.PendingClientToolCallIDs,
		Messages:                 []json.RawMessage{},
	}
	for _, m := range p.Messages {
		b, err := protojson.Marshal(m)
		if err != nil {
			return err
		}
		f.Messages = append(f.Messages, b)
	}
	for _, a := range p.PendingApprovals {
		b, err := protojson.Marshal(a)
		if err != nil {
			return err
		}
		f.PendingApprovals = append(f.PendingApprovals, b)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".agentctl-parked-*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after the rename, there is nothing to remove
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// historyName is how a parked file names a run's history: empty for the client's (the
// files of agentctl versions before threads say nothing), else the enum's name.
func historyName(h agentdv1.History) string {
	if h == agentdv1.History_HISTORY_UNSPECIFIED || h == agentdv1.History_HISTORY_CLIENT {
		return ""
	}
	return h.String()
}

// loadParked reads a file save wrote.
func loadParked(path string) (*parkedRun, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f parkedFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Version != parkedVersion {
		return nil, fmt.Errorf("%s: not a parked run saved by agentctl (agentctl_parked_run is %d, want %d)", path, f.Version, parkedVersion)
	}
	if len(f.Continuation) == 0 {
		return nil, fmt.Errorf("%s: no continuation", path)
	}
	history, ok := agentdv1.History_value[f.History]
	if f.History != "" && !ok {
		return nil, fmt.Errorf("%s: history %q is none agentctl knows", path, f.History)
	}
	p := &parkedRun{
		Agent:                    f.Agent,
		ThreadID:                 f.ThreadID,
		RunID:                    f.RunID,
		History:                  agentdv1.History(history),
		Reason:                   agentdv1.RunEndReason(agentdv1.RunEndReason_value[f.Reason]),
		Continuation:             f.Continuation,
		PendingClientToolCallIDs: f.PendingClientToolCallIDs,
		SavedAt:                  f.SavedAt,
	}
	var errs []error
	for i, raw := range f.Messages {
		m := &agentdv1.Message{}
		if err := protojson.Unmarshal(raw, m); err != nil {
			errs = append(errs, fmt.Errorf("messages[%d]: %w", i, err))
		}
		p.Messages = append(p.Messages, m)
	}
	for i, raw := range f.PendingApprovals {
		a := &agentdv1.ApprovalRequested{}
		if err := protojson.Unmarshal(raw, a); err != nil {
			errs = append(errs, fmt.Errorf("pending_approvals[%d]: %w", i, err))
		}
		p.PendingApprovals = append(p.PendingApprovals, a)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return p, nil
}
