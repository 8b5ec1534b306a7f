package service_test

import (
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/agentd/agentd/service/runs"
)

// The engine's codes are numbered as gRPC's: the wire maps one to the other by number,
// and a code journaled in a RunError, or kept with an input's answer, is read back by
// number on any replica.
func TestEngineCodesAreGRPCCodes(t *testing.T) {
	for _, c := range []struct {
		engine runs.Code
		grpc   codes.Code
	}{
		{runs.OK, codes.OK}, {runs.Canceled, codes.Canceled}, {runs.Unknown, codes.Unknown},
		{runs.InvalidArgument, codes.InvalidArgument}, {runs.DeadlineExceeded, codes.DeadlineExceeded},
		{runs.NotFound, codes.NotFound}, {runs.AlreadyExists, codes.AlreadyExists},
		{runs.PermissionDenied, codes.PermissionDenied}, {runs.ResourceExhausted, codes.ResourceExhausted},
		{runs.FailedPrecondition, codes.FailedPrecondition}, {runs.Aborted, codes.Aborted},
		{runs.OutOfRange, codes.OutOfRange}, {runs.Unimplemented, codes.Unimplemented},
		{runs.Internal, codes.Internal}, {runs.Unavailable, codes.Unavailable},
		{runs.DataLoss, codes.DataLoss}, {runs.Unauthenticated, codes.Unauthenticated},
	} {
		if uint32(c.engine) != uint32(c.grpc) {
			t.Errorf("runs code %d is not gRPC's %s (%d)", c.engine, c.grpc, c.grpc)
		}
	}
}
