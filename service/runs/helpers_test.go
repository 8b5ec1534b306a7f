package runs

import "errors"

// codeOf is the code of the engine's error err, as the wire answers it: Unknown for an
// error of another kind, OK for none.
func codeOf(err error) Code {
	if err == nil {
		return OK
	}
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return Unknown
}
