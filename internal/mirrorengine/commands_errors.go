package mirrorengine

import (
	"errors"
	"fmt"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// ErrorCode names a control-plane failure with the KIP-1279 error names; the worker's API
// returns them as they are.
type ErrorCode string

// The error names the commands use, from the KIP vocabulary (internal/kip).
const (
	CodeUnknownClusterMirror        ErrorCode = kip.CodeUnknownClusterMirror
	CodeClusterMirrorAlreadyExists  ErrorCode = kip.CodeClusterMirrorAlreadyExists
	CodeClusterMirrorNotEmpty       ErrorCode = kip.CodeClusterMirrorNotEmpty
	CodeInvalidClusterMirrorName    ErrorCode = kip.CodeInvalidClusterMirrorName
	CodeInvalidClusterMirrorConfig  ErrorCode = kip.CodeInvalidClusterMirrorConfig
	CodeTopicAlreadyInClusterMirror ErrorCode = kip.CodeTopicAlreadyInClusterMirror
	CodeTopicNotInClusterMirror     ErrorCode = kip.CodeTopicNotInClusterMirror
	CodeInvalidMirrorPartitionState ErrorCode = kip.CodeInvalidMirrorPartitionState
	CodeMirrorTopicAlreadyStopped   ErrorCode = kip.CodeMirrorTopicAlreadyStopped
	CodeSourceClusterIDMismatch     ErrorCode = kip.CodeSourceClusterIDMismatch
	CodeSourceClusterUnreachable    ErrorCode = kip.CodeSourceClusterUnreachable
	CodeSaslAuthenticationFailed    ErrorCode = kip.CodeSaslAuthenticationFailed
	CodeUnknownTopicOrPartition     ErrorCode = kip.CodeUnknownTopicOrPartition
	CodeInvalidTopic                ErrorCode = kip.CodeInvalidTopic
	CodeInvalidRequest              ErrorCode = kip.CodeInvalidRequest
	CodeClusterAuthorizationFailed  ErrorCode = kip.CodeClusterAuthorizationFailed
	CodeUnknownServerError          ErrorCode = kip.CodeUnknownServerError
	CodeUnsupportedVersion          ErrorCode = kip.CodeUnsupportedVersion
	CodeCoordinatorNotAvailable     ErrorCode = kip.CodeCoordinatorNotAvailable
	CodeRequestTimedOut             ErrorCode = kip.CodeRequestTimedOut
)

// CommandError is a command's refusal or failure: a KIP error name, what went wrong, and
// the error that caused it, if any.
type CommandError struct {
	Code    ErrorCode
	Message string
	Err     error
}

func (e *CommandError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func (e *CommandError) Unwrap() error { return e.Err }

// cmdErr builds a CommandError; the operand of a %w verb in format is its cause.
func cmdErr(code ErrorCode, format string, args ...any) *CommandError {
	err := fmt.Errorf(format, args...)
	return &CommandError{Code: code, Message: err.Error(), Err: errors.Unwrap(err)}
}
