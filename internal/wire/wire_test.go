package wire_test

import (
	"testing"

	"google.golang.org/protobuf/proto"

	agentdv1 "github.com/agentd/agentd/gen/agentd/v1"
	"github.com/agentd/agentd/internal/wire"
	"github.com/agentd/agentd/runtime"
)

// Every string a tool's media carries reaches the wire as valid UTF-8: a message with a
// string that is not would not marshal, and the event carrying it would be lost.
func TestMediaToProtoMarshalsWhateverAToolSent(t *testing.T) {
	media := []runtime.Media{{MIMEType: "image/\xffpng", URI: "https://example.com/\xfe", Name: "a\xffb", Data: []byte{0xff}}}
	for _, opts := range []wire.Options{{}, {OmitBinary: true}} {
		parts := wire.MediaToProto(media, opts)
		if _, err := proto.Marshal(&agentdv1.ToolResultPart{Media: parts}); err != nil {
			t.Errorf("options %+v: the media does not marshal: %v", opts, err)
		}
		if got := parts[0].GetMimeType(); got != "image/\uFFFDpng" {
			t.Errorf("options %+v: mime type %q, want the invalid byte replaced", opts, got)
		}
	}
}
