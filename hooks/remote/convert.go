package remote

import (
	"context"
	"log/slog"

	hooksv1 "github.com/agentd/agentd/gen/agentd/hooks/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// The transcripts a hook server is sent are converted by internal/wire, as the service's
// are, with hookWire's options. Requests leave out media bytes and opaque reasoning
// state: a hook decides on text, and a transcript with images would soon outgrow a hook
// server's message size limit.

// runInfo converts the run's description for the hook's requests.
func (h *Hook) runInfo(ctx context.Context, in *runtime.RunInfo) *hooksv1.RunInfo {
	return runInfoToProto(ctx, in, h.log, "hook", h.name)
}

// runInfoToProto converts the run's description. Metadata that does not encode as a JSON
// object is left out, with a warning on log naming the caller (kind "hook" or
// "guardrail", and its name).
func runInfoToProto(ctx context.Context, in *runtime.RunInfo, log *slog.Logger, kind, name string) *hooksv1.RunInfo {
	if in == nil {
		return nil
	}
	ri := &hooksv1.RunInfo{RunId: in.RunID, ThreadId: in.ThreadID, Agent: wire.ProtoString(in.Agent), Model: wire.ProtoString(in.Model)}
	if len(in.Metadata) > 0 {
		md, err := wire.MetadataToStruct(in.Metadata)
		if err != nil {
			log.WarnContext(ctx, "remote "+kind+": run metadata left out of the request", kind, name, "error", err)
		}
		ri.Metadata = md
	}
	return ri
}

// hookWire sends the transcript to a hook server without media bytes or opaque reasoning
// state: a hook inspects, it does not replay.
var hookWire = wire.Options{OmitBinary: true}

// hookOutput converts an output a hook server wrote; a JSON output that does not encode
// is an invalid response, field naming it.
func hookOutput(o *hooksv1.ToolOutput, field string) (runtime.Output, error) {
	out, err := wire.HookOutputFromProto(o, field)
	if err != nil {
		return out, invalid("%v", err)
	}
	return out, nil
}
