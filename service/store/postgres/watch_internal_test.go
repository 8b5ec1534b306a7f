package postgres

import (
	"strings"
	"testing"
)

func TestChannelFor(t *testing.T) {
	if got := channelFor("agentd"); got != "agentd_runs.agentd" {
		t.Errorf("channelFor(agentd) = %q", got)
	}
	// Schemas whose names would make the channel's too long get channels of their own
	// all the same.
	a, b := strings.Repeat("a", 63), strings.Repeat("a", 62)+"b"
	ca, cb := channelFor(a), channelFor(b)
	if len(ca) > 63 || len(cb) > 63 || ca == cb {
		t.Errorf("channels of two long schemas: %q and %q; want distinct, of 63 bytes at most", ca, cb)
	}
}
