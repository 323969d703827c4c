package mirrorengine

import "fmt"

// ErrorCode names a control-plane failure with the KIP-1279 error names; the worker's API
// returns them as they are.
type ErrorCode string

// The KIP's error names used by the commands.
const (
	CodeUnknownClusterMirror        ErrorCode = "UNKNOWN_CLUSTER_MIRROR"
	CodeClusterMirrorAlreadyExists  ErrorCode = "CLUSTER_MIRROR_ALREADY_EXISTS"
	CodeClusterMirrorNotEmpty       ErrorCode = "CLUSTER_MIRROR_NOT_EMPTY"
	CodeInvalidClusterMirrorName    ErrorCode = "INVALID_CLUSTER_MIRROR_NAME"
	CodeInvalidClusterMirrorConfig  ErrorCode = "INVALID_CLUSTER_MIRROR_CONFIG"
	CodeTopicAlreadyInClusterMirror ErrorCode = "TOPIC_ALREADY_IN_CLUSTER_MIRROR"
	CodeTopicNotInClusterMirror     ErrorCode = "TOPIC_NOT_IN_CLUSTER_MIRROR"
	CodeInvalidMirrorPartitionState ErrorCode = "INVALID_MIRROR_PARTITION_STATE"
	CodeMirrorTopicAlreadyStopped   ErrorCode = "MIRROR_TOPIC_ALREADY_STOPPED"
	CodeSourceClusterIDMismatch     ErrorCode = "SOURCE_CLUSTER_ID_MISMATCH"
	CodeSourceClusterUnreachable    ErrorCode = "SOURCE_CLUSTER_UNREACHABLE"
	CodeSaslAuthenticationFailed    ErrorCode = "SASL_AUTHENTICATION_FAILED"
	CodeUnknownTopicOrPartition     ErrorCode = "UNKNOWN_TOPIC_OR_PARTITION"
	CodeInvalidTopic                ErrorCode = "INVALID_TOPIC_EXCEPTION"
	CodeInvalidRequest              ErrorCode = "INVALID_REQUEST"
	CodeClusterAuthorizationFailed  ErrorCode = "CLUSTER_AUTHORIZATION_FAILED"
	CodeUnknownServerError          ErrorCode = "UNKNOWN_SERVER_ERROR"
	CodeUnsupportedVersion          ErrorCode = "UNSUPPORTED_VERSION"
	// The destination did not answer for __mirror_state (the KIP's coordinator topic), so a
	// command recorded nothing: Kafka's answer when a coordinator cannot write its log.
	CodeCoordinatorNotAvailable ErrorCode = "COORDINATOR_NOT_AVAILABLE"
	// A command's record was sent but not acknowledged in time, so it may or may not have
	// taken effect: Kafka's answer to a produce that timed out.
	CodeRequestTimedOut ErrorCode = "REQUEST_TIMED_OUT"
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
