package mirrorengine

import (
	"errors"
	"fmt"
)

// CommandError is a command's refusal or failure: a KIP error name, what went wrong, and
// the error that caused it, if any.
type CommandError struct {
	Code    string // a KIP error name (internal/kip's Code constants)
	Message string
	Err     error
}

func (e *CommandError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func (e *CommandError) Unwrap() error { return e.Err }

// cmdErr builds a CommandError; the operand of a %w verb in format is its cause.
func cmdErr(code, format string, args ...any) *CommandError {
	err := fmt.Errorf(format, args...)
	return &CommandError{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}
