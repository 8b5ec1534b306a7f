package service

import (
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"

	"github.com/agentd/agentd/service/runs"
)

// errorDomain is the google.rpc.ErrorInfo domain of agentd's errors; their reasons are in
// reasons.go, here for the wire's and in service/runs for the engine's.
const errorDomain = "agentd"

// toStatus is the one mapping of the engine's errors to gRPC statuses: a *runs.Error
// becomes the status of its code, with an ErrorInfo (when it has a reason), a
// BadRequest (when it names fields) and its details; any other error is returned as it
// is (a status already, such as a hook's, or an error gRPC reports as UNKNOWN).
func toStatus(err error) error {
	e, ok := errors.AsType[*runs.Error](err)
	if !ok {
		return err
	}
	st := status.New(codes.Code(e.Code), e.Message)
	var details []protoadapt.MessageV1
	if e.Reason != "" {
		details = append(details, &errdetails.ErrorInfo{Reason: e.Reason, Domain: errorDomain, Metadata: e.Meta})
	}
	if len(e.Fields) > 0 {
		details = append(details, &errdetails.BadRequest{FieldViolations: e.Fields})
	}
	details = append(details, e.Details...)
	if len(details) > 0 {
		if withDetails, err := st.WithDetails(details...); err == nil {
			st = withDetails
		}
	}
	return st.Err()
}
