package runs

import (
	"fmt"

	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
	"github.com/agentd/agentd/service/continuation"
)

// opened is a continuation opened for a resume: its parked step in the runtime's terms.
type opened struct {
	*continuation.Continuation
	Pending *runtime.Pending
}

// openContinuation opens b for a client's resume: verified, unexpired, its parked step
// converted. Every error wraps one of continuation's Err sentinels.
func (s *Manager) openContinuation(b []byte) (*opened, error) {
	ct, err := s.codec.Open(b)
	return s.resumable(b, ct, err)
}

// verifyContinuation opens b whether or not it expired: a run parked in the store
// resumes from its own, however long it waited.
func (s *Manager) verifyContinuation(b []byte) (*opened, error) {
	ct, err := s.codec.Verify(b)
	return s.resumable(b, ct, err)
}

func (s *Manager) resumable(b []byte, ct *continuation.Continuation, err error) (*opened, error) {
	if err != nil {
		return nil, err
	}
	p, err := wire.PendingFromProto(ct.Pending)
	if err != nil {
		// Only a server holding the key can get here: a bug, a newer release, or a key
		// shared with something that is not agentd.
		return nil, fmt.Errorf("%w: signed payload (version %d) does not decode: %v", continuation.ErrMalformed, b[0], err)
	}
	return &opened{Continuation: ct, Pending: p}, nil
}

// seal returns the continuation that resumes the run from p, for a client that sends
// back the messages digest was taken of.
func (ss *session) seal(digest []byte, p *runtime.Pending) ([]byte, error) {
	pending, err := wire.PendingToProto(p)
	if err != nil {
		return nil, fmt.Errorf("seal continuation: %w", err)
	}
	return ss.srv.codec.Seal(&continuation.Continuation{
		Agent: ss.entry.Name, ThreadID: ss.thread, Digest: digest, Pending: pending,
		Grants: ss.runGrants(), Owner: ss.owner,
	})
}
