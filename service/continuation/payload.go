package continuation

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	continuationv1 "github.com/agentd/agentd/gen/agentd/continuation/v1"
)

// The payload of format 2 is an agentd.continuation.v1.Continuation. The parked step in
// it (Pending) is converted from and to the runtime's types by internal/wire
// (PendingToProto, PendingFromProto). Strings that are not UTF-8 have each invalid run
// replaced by U+FFFD, as in any proto string.

// encodePayload returns ct as the payload of format 2.
func encodePayload(ct *Continuation) ([]byte, error) {
	exp := timestamppb.New(ct.ExpiresAt)
	if err := exp.CheckValid(); err != nil {
		return nil, fmt.Errorf("expiry: %w", err)
	}
	return proto.Marshal(&continuationv1.Continuation{
		Agent:            protoString(ct.Agent),
		ThreadId:         protoString(ct.ThreadID),
		DigestVersion:    digestV1,
		TranscriptDigest: ct.Digest,
		ExpiresAt:        exp,
		Pending:          ct.Pending,
		Grants:           ct.Grants,
		Owner:            protoString(ct.Owner),
	})
}

// decodePayload decodes the payload of format 2.
func decodePayload(b []byte) (*Continuation, error) {
	var pc continuationv1.Continuation
	if err := proto.Unmarshal(b, &pc); err != nil {
		return nil, err
	}
	if v := pc.GetDigestVersion(); v != digestV1 {
		return nil, fmt.Errorf("transcript digest version %d, which this server does not take (it takes %d): resume on a replica of the release that sealed it", v, digestV1)
	}
	if pc.GetExpiresAt() == nil {
		return nil, errors.New("no expiry")
	}
	if err := pc.GetExpiresAt().CheckValid(); err != nil {
		return nil, fmt.Errorf("expiry: %w", err)
	}
	return &Continuation{
		Agent:     pc.GetAgent(),
		ThreadID:  pc.GetThreadId(),
		Digest:    pc.GetTranscriptDigest(),
		ExpiresAt: pc.GetExpiresAt().AsTime(),
		Pending:   pc.GetPending(),
		Grants:    pc.GetGrants(),
		Owner:     pc.GetOwner(),
	}, nil
}

// protoString makes s safe for a protobuf string field, which must be valid UTF-8.
func protoString(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}
