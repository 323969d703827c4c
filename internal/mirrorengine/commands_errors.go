package mirrorengine

import (
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

// CommandError is a command's refusal or failure: a KIP error name and what went wrong.
type CommandError struct {
	Code    ErrorCode
	Message string
}

func (e *CommandError) Error() string { return fmt.Sprintf("%s: %s", e.Code, e.Message) }

func cmdErr(code ErrorCode, format string, args ...any) *CommandError {
	return &CommandError{Code: code, Message: fmt.Sprintf(format, args...)}
}
