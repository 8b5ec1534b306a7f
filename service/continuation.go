package service

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/runtime"
)

// A continuation on the wire is
//
//	version (1 byte) | payload | HMAC-SHA256(key, version | payload) (32 bytes)
//
// where version is the format of the payload: 2, the one seal writes, is an
// agentd.continuation.v1.Continuation in proto binary (continuation_payload.go); 1 is
// the JSON format of the previous release, which open still reads
// (continuation_legacy.go). It is signed, not encrypted: the client can read it (it saw
// everything in it as events anyway), it cannot change it.
const (
	continuationVersion = 2
	continuationMACSize = sha256.Size
	// maxContinuationSize bounds what open reads and what seal produces, so a continuation
	// that could not be opened is refused when the run parks, not when it resumes.
	maxContinuationSize = 4 << 20
	// defaultContinuationTTL is how long a continuation stays valid unless configured.
	defaultContinuationTTL = 24 * time.Hour
)

// The kinds of refused continuation. Every error of open and check wraps exactly one.
var (
	errContinuationMalformed = errors.New("continuation malformed")
	errContinuationForged    = errors.New("continuation signature does not match")
	errContinuationExpired   = errors.New("continuation expired")
	errContinuationMismatch  = errors.New("continuation mismatch")
)

// continuation is what a continuation carries.
type continuation struct {
	Agent    string
	ThreadID string
	// Digest is the transcript digest of the messages the client must send back in
	// RunSpec.messages: a transcriptHasher's sum (transcriptDigest).
	Digest []byte
	// DigestVersion says how Digest was taken: digestV1, or digestLegacy for a
	// continuation of format 1. seal records digestV1 when it is zero.
	DigestVersion digestVersion
	// Pending is the parked step; nil, or a Pending with no Calls, resumes by calling the
	// model.
	Pending   *runtime.Pending
	ExpiresAt time.Time
	// Grants are the run's grants of scope RUN.
	Grants []*agentdv1.Grant
	// Owner is the identity that started the run (Server.identity); empty for a run
	// started anonymously and for a continuation sealed before it was recorded, which
	// anyone may resume.
	Owner string
}

// continuationCodec seals and opens continuations. It is safe for concurrent use.
type continuationCodec struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// newContinuationCodec returns a codec signing with key (see continuationKey). A ttl of
// zero or less means 24 hours; a nil now means time.Now.
func newContinuationCodec(key []byte, ttl time.Duration, now func() time.Time) *continuationCodec {
	if ttl <= 0 {
		ttl = defaultContinuationTTL
	}
	if now == nil {
		now = time.Now
	}
	return &continuationCodec{key: bytes.Clone(key), ttl: ttl, now: now}
}

// seal returns the signed bytes of ct, in the current format. A zero ct.ExpiresAt is set
// to now plus the codec's ttl first, so the caller learns the expiry, and a zero
// ct.DigestVersion to digestV1. A digest of format 1 cannot be sealed: that format is
// read only. The strings of ct must be UTF-8: invalid bytes become U+FFFD, as they would
// in any proto string field.
func (c *continuationCodec) seal(ct *continuation) ([]byte, error) {
	if ct == nil {
		return nil, errors.New("seal continuation: nil")
	}
	if ct.ExpiresAt.IsZero() {
		ct.ExpiresAt = c.now().Add(c.ttl)
	}
	if ct.DigestVersion == 0 {
		ct.DigestVersion = digestV1
	}
	switch ct.DigestVersion {
	case digestV1:
	case digestLegacy:
		return nil, errors.New("seal continuation: the transcript digest is format 1's, which is read only")
	default:
		return nil, fmt.Errorf("seal continuation: transcript digest version %d, want %d", ct.DigestVersion, digestV1)
	}
	payload, err := encodePayload(ct)
	if err != nil {
		return nil, fmt.Errorf("seal continuation: %w", err)
	}
	if n := 1 + len(payload) + continuationMACSize; n > maxContinuationSize {
		return nil, fmt.Errorf("seal continuation: %d bytes, more than the %d byte limit (tool results or media too large to park)", n, maxContinuationSize)
	}
	b := make([]byte, 0, 1+len(payload)+continuationMACSize)
	b = append(b, continuationVersion)
	b = append(b, payload...)
	return c.sign(b), nil
}

// open verifies and decodes b, in either format. It refuses, with an error wrapping one
// of the errContinuation sentinels, anything it did not seal with the same key, and a
// continuation past its expiry. It never panics.
func (c *continuationCodec) open(b []byte) (*continuation, error) {
	ct, err := c.verify(b)
	if err != nil {
		return nil, err
	}
	if now := c.now(); !now.Before(ct.ExpiresAt) {
		return nil, fmt.Errorf("%w at %s; start a new run with the transcript", errContinuationExpired, ct.ExpiresAt.Format(time.RFC3339))
	}
	return ct, nil
}

// verify opens a continuation whether or not it expired: a run parked in the store
// resumes from its own, however long it waited.
func (c *continuationCodec) verify(b []byte) (*continuation, error) {
	switch {
	case len(b) == 0:
		return nil, fmt.Errorf("%w: empty", errContinuationMalformed)
	case len(b) > maxContinuationSize:
		return nil, fmt.Errorf("%w: %d bytes, more than the %d byte limit", errContinuationMalformed, len(b), maxContinuationSize)
	case len(b) < 1+continuationMACSize:
		return nil, fmt.Errorf("%w: %d bytes, too short to hold a version and a signature", errContinuationMalformed, len(b))
	case b[0] != continuationVersion && b[0] != continuationVersionJSON:
		return nil, fmt.Errorf("%w: unsupported version %d (this server reads versions %d and %d)", errContinuationMalformed, b[0], continuationVersionJSON, continuationVersion)
	}
	body, mac := b[:len(b)-continuationMACSize], b[len(b)-continuationMACSize:]
	if !hmac.Equal(mac, c.mac(body)) {
		return nil, fmt.Errorf("%w: it was signed with another key than this replica's (replicas hold different keys), or altered; every replica that may resume a run needs the same key (AGENTD_CONTINUATION_KEY or --continuation-key-file)", errContinuationForged)
	}
	decode := decodePayload
	if body[0] == continuationVersionJSON {
		decode = decodeLegacyPayload
	}
	ct, err := decode(body[1:])
	if err != nil {
		// Only a server holding the key can get here: a bug, a newer release, or a key
		// shared with something that is not agentd.
		return nil, fmt.Errorf("%w: signed payload (version %d) does not decode: %v", errContinuationMalformed, body[0], err)
	}
	return ct, nil
}

// transcriptDigests gives the digest of a transcript in a version a continuation may
// name (digestVersion), or nil for a version it does not take. A *transcriptHasher takes
// digestV1; [withLegacy] adds format 1's.
type transcriptDigests interface {
	sumOf(v digestVersion) []byte
}

// check reports whether ct was issued for this agent, thread and transcript, the
// messages the client sent back; the error (wrapping errContinuationMismatch) names
// everything that differs. The transcript's digest is taken as ct's was
// (ct.DigestVersion), and that one alone.
func (ct *continuation) check(agent, threadID string, transcript transcriptDigests) error {
	if ct == nil {
		return fmt.Errorf("%w: no continuation", errContinuationMismatch)
	}
	var diffs []string
	if ct.Agent != agent {
		diffs = append(diffs, fmt.Sprintf("issued for agent %q, not %q", ct.Agent, agent))
	}
	if ct.ThreadID != threadID {
		diffs = append(diffs, fmt.Sprintf("issued for thread %q, not %q", ct.ThreadID, threadID))
	}
	if digest := transcript.sumOf(ct.DigestVersion); digest == nil || !hmac.Equal(ct.Digest, digest) {
		diffs = append(diffs, "the messages sent back differ from the transcript the parked run reported")
	}
	if len(diffs) > 0 {
		return fmt.Errorf("%w: %s", errContinuationMismatch, strings.Join(diffs, "; "))
	}
	return nil
}

// checkCaller reports whether who may resume ct: its run's owner, or anyone when it has
// none. who is taken as seal took the owner, invalid UTF-8 replaced, so that an owner
// whose name is not UTF-8 still resumes its own. The error wraps errContinuationMismatch
// and does not name the owner, which is another caller's.
func (ct *continuation) checkCaller(who string) error {
	if ct.Owner == "" || ct.Owner == protoString(who) {
		return nil
	}
	return fmt.Errorf("%w: the continuation belongs to another caller, the one that started its run; only that caller may resume it", errContinuationMismatch)
}

func (c *continuationCodec) mac(body []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return m.Sum(nil)
}

// sign appends the MAC of body to body.
func (c *continuationCodec) sign(body []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write(body)
	return m.Sum(body)
}
