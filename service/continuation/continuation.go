// Package continuation seals and opens continuations: the signed token from which a
// parked run resumes, on any replica holding the same key. It holds the token's format
// (payload.go), its signing key (key.go) and the transcript digest that binds a
// continuation to the messages its client must send back (digest.go). The parked step
// travels as an agentd.continuation.v1.Pending; internal/wire converts it from and to
// the runtime's types.
package continuation

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
)

// A continuation on the wire is
//
//	version (1 byte) | payload | HMAC-SHA256(key, version | payload) (32 bytes)
//
// where version is the format of the payload: 2 is an agentd.continuation.v1.Continuation
// in proto binary (payload.go). Format 1, the JSON of an earlier release, is no longer
// read. It is signed, not encrypted: the client can read it (it saw everything in it as
// events anyway), it cannot change it.
const (
	continuationVersion = 2
	// continuationVersionJSON is format 1's first byte, named only to refuse it clearly.
	continuationVersionJSON = 1
	continuationMACSize     = sha256.Size
	// MaxSize bounds what Open reads and what Seal produces, so a continuation that could
	// not be opened is refused when the run parks, not when it resumes.
	MaxSize = 4 << 20
	// DefaultTTL is how long a continuation stays valid unless configured.
	DefaultTTL = 24 * time.Hour
)

// The kinds of refused continuation. Every error of Open, Verify and the checks wraps
// exactly one.
var (
	ErrMalformed = errors.New("continuation malformed")
	ErrForged    = errors.New("continuation signature does not match")
	ErrExpired   = errors.New("continuation expired")
	ErrMismatch  = errors.New("continuation mismatch")
)

// Continuation is what a continuation carries.
type Continuation struct {
	Agent    string
	ThreadID string
	// Digest is the transcript digest of the messages the client must send back in
	// RunSpec.messages: a Hasher's Sum.
	Digest []byte
	// Pending is the parked step; nil, or a Pending with no calls, resumes by calling the
	// model.
	Pending   *continuationv1.Pending
	ExpiresAt time.Time
	// Grants are the run's grants of scope RUN.
	Grants []*agentdv1.Grant
	// Owner is the identity that started the run; empty for a run
	// started anonymously and for a continuation sealed before it was recorded, which
	// anyone may resume.
	Owner string
}

// Codec seals and opens continuations. It is safe for concurrent use.
type Codec struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewCodec returns a codec signing with key (see Key). A ttl of zero or less means
// DefaultTTL; a nil now means time.Now.
func NewCodec(key []byte, ttl time.Duration, now func() time.Time) *Codec {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if now == nil {
		now = time.Now
	}
	return &Codec{key: bytes.Clone(key), ttl: ttl, now: now}
}

// Seal returns the signed bytes of ct. A zero ct.ExpiresAt is set to now plus the
// codec's ttl first, so the caller learns the expiry. The strings of ct must be UTF-8:
// invalid bytes become U+FFFD, as they would in any proto string field.
func (c *Codec) Seal(ct *Continuation) ([]byte, error) {
	if ct == nil {
		return nil, errors.New("seal continuation: nil")
	}
	if ct.ExpiresAt.IsZero() {
		ct.ExpiresAt = c.now().Add(c.ttl)
	}
	payload, err := encodePayload(ct)
	if err != nil {
		return nil, fmt.Errorf("seal continuation: %w", err)
	}
	if n := 1 + len(payload) + continuationMACSize; n > MaxSize {
		return nil, fmt.Errorf("seal continuation: %d bytes, more than the %d byte limit (tool results or media too large to park)", n, MaxSize)
	}
	b := make([]byte, 0, 1+len(payload)+continuationMACSize)
	b = append(b, continuationVersion)
	b = append(b, payload...)
	return c.sign(b), nil
}

// Open verifies and decodes b. It refuses, with an error wrapping one of the Err
// sentinels, anything it did not seal with the same key, and a continuation past its
// expiry. It never panics.
func (c *Codec) Open(b []byte) (*Continuation, error) {
	ct, err := c.Verify(b)
	if err != nil {
		return nil, err
	}
	if now := c.now(); !now.Before(ct.ExpiresAt) {
		return nil, fmt.Errorf("%w at %s; start a new run with the transcript", ErrExpired, ct.ExpiresAt.Format(time.RFC3339))
	}
	return ct, nil
}

// Verify opens a continuation whether or not it expired: a run parked in the store
// resumes from its own, however long it waited.
func (c *Codec) Verify(b []byte) (*Continuation, error) {
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("%w: empty", ErrMalformed)
	case len(b) > MaxSize:
		return nil, fmt.Errorf("%w: %d bytes, more than the %d byte limit", ErrMalformed, len(b), MaxSize)
	case len(b) < 1+continuationMACSize:
		return nil, fmt.Errorf("%w: %d bytes, too short to hold a version and a signature", ErrMalformed, len(b))
	case b[0] == continuationVersionJSON:
		return nil, fmt.Errorf("%w: format 1, which an earlier release sealed and this one no longer reads; start a new run with the transcript", ErrMalformed)
	case b[0] != continuationVersion:
		return nil, fmt.Errorf("%w: unsupported version %d (this server reads version %d)", ErrMalformed, b[0], continuationVersion)
	}
	body, mac := b[:len(b)-continuationMACSize], b[len(b)-continuationMACSize:]
	if !hmac.Equal(mac, c.mac(body)) {
		return nil, fmt.Errorf("%w: it was signed with another key than this replica's (replicas hold different keys), or altered; every replica that may resume a run needs the same key (AGENTD_CONTINUATION_KEY or --continuation-key-file)", ErrForged)
	}
	ct, err := decodePayload(body[1:])
	if err != nil {
		// Only a server holding the key can get here: a bug, a newer release, or a key
		// shared with something that is not agentd.
		return nil, fmt.Errorf("%w: signed payload (version %d) does not decode: %v", ErrMalformed, body[0], err)
	}
	return ct, nil
}

// Check reports whether ct was issued for this agent, thread and transcript, the
// messages the client sent back, fed to transcript; the error (wrapping ErrMismatch)
// names everything that differs.
func (ct *Continuation) Check(agent, threadID string, transcript *Hasher) error {
	if ct == nil {
		return fmt.Errorf("%w: no continuation", ErrMismatch)
	}
	var diffs []string
	if ct.Agent != agent {
		diffs = append(diffs, fmt.Sprintf("issued for agent %q, not %q", ct.Agent, agent))
	}
	if ct.ThreadID != threadID {
		diffs = append(diffs, fmt.Sprintf("issued for thread %q, not %q", ct.ThreadID, threadID))
	}
	if !hmac.Equal(ct.Digest, transcript.Sum()) {
		diffs = append(diffs, "the messages sent back differ from the transcript the parked run reported")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", ErrMismatch, strings.Join(diffs, "; "))
	}
	return nil
}

// CheckCaller reports whether who may resume ct: its run's owner, or anyone when it has
// none. who is taken as seal took the owner, invalid UTF-8 replaced, so that an owner
// whose name is not UTF-8 still resumes its own. The error wraps ErrMismatch
// and does not name the owner, which is another caller's.
func (ct *Continuation) CheckCaller(who string) error {
	if ct.Owner == "" || ct.Owner == protoString(who) {
		return nil
	}
	return fmt.Errorf("%w: the continuation belongs to another caller, the one that started its run; only that caller may resume it", ErrMismatch)
}

func (c *Codec) mac(body []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return m.Sum(nil)
}

// sign appends the MAC of body to body.
func (c *Codec) sign(body []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return m.Sum(body)
}
