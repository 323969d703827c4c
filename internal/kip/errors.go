package kip

import (
	"net/http"
	"strings"
)

// The error codes: the KIP-1279 (and Kafka) error names the commands answer with, plus the
// few the worker adds (AUTHENTICATION_FAILED, COORDINATOR_LOAD_IN_PROGRESS,
// MIRROR_TOPIC_OWNER_MISMATCH, and the __mirror_state record codes). A command that cannot
// reach __mirror_state answers with Kafka's names for a coordinator that cannot write its log
// (COORDINATOR_NOT_AVAILABLE) and for a write that timed out (REQUEST_TIMED_OUT).
const (
	CodeUnknownClusterMirror        = "UNKNOWN_CLUSTER_MIRROR"
	CodeClusterMirrorAlreadyExists  = "CLUSTER_MIRROR_ALREADY_EXISTS"
	CodeClusterMirrorNotEmpty       = "CLUSTER_MIRROR_NOT_EMPTY"
	CodeInvalidClusterMirrorName    = "INVALID_CLUSTER_MIRROR_NAME"
	CodeInvalidClusterMirrorConfig  = "INVALID_CLUSTER_MIRROR_CONFIG"
	CodeTopicAlreadyInClusterMirror = "TOPIC_ALREADY_IN_CLUSTER_MIRROR"
	CodeTopicNotInClusterMirror     = "TOPIC_NOT_IN_CLUSTER_MIRROR"
	CodeInvalidMirrorPartitionState = "INVALID_MIRROR_PARTITION_STATE"
	CodeMirrorTopicAlreadyStopped   = "MIRROR_TOPIC_ALREADY_STOPPED"
	CodeSourceClusterIDMismatch     = "SOURCE_CLUSTER_ID_MISMATCH"
	CodeSourceClusterUnreachable    = "SOURCE_CLUSTER_UNREACHABLE"
	CodeSaslAuthenticationFailed    = "SASL_AUTHENTICATION_FAILED"
	CodeUnknownTopicOrPartition     = "UNKNOWN_TOPIC_OR_PARTITION"
	CodeInvalidTopic                = "INVALID_TOPIC_EXCEPTION"
	CodeInvalidRequest              = "INVALID_REQUEST"
	CodeClusterAuthorizationFailed  = "CLUSTER_AUTHORIZATION_FAILED"
	CodeUnknownServerError          = "UNKNOWN_SERVER_ERROR"
	// CodeUnsupportedVersion: a cluster too old for its side of a mirror.
	CodeUnsupportedVersion = "UNSUPPORTED_VERSION"

	// CodeAuthenticationFailed: no or a wrong bearer token on the worker's API.
	CodeAuthenticationFailed = "AUTHENTICATION_FAILED"
	// CodeCoordinatorLoadInProgress: the worker is still loading __mirror_state, the Kafka
	// name for a coordinator that is not ready yet. Clients retry it.
	CodeCoordinatorLoadInProgress = "COORDINATOR_LOAD_IN_PROGRESS"
	// CodeMirrorTopicOwnerMismatch: a command for a topic that another owner manages.
	CodeMirrorTopicOwnerMismatch = "MIRROR_TOPIC_OWNER_MISMATCH"
	// CodeMirrorStateRecordUnreadable: a command on a mirror or topic whose __mirror_state
	// record cannot be read, until the operator removes it.
	CodeMirrorStateRecordUnreadable = "MIRROR_STATE_RECORD_UNREADABLE"
	// CodeUnknownMirrorStateRecord: no __mirror_state record has the key.
	CodeUnknownMirrorStateRecord = "UNKNOWN_MIRROR_STATE_RECORD"
	// CodeCoordinatorNotAvailable: the destination cluster did not answer for __mirror_state
	// within the command bound, so the command recorded nothing and did not take effect.
	// Clients retry it.
	CodeCoordinatorNotAvailable = "COORDINATOR_NOT_AVAILABLE"
	// CodeRequestTimedOut: the destination cluster did not acknowledge a command's
	// __mirror_state record within the command bound, so the command may or may not have
	// taken effect. Clients retry it; a retry of a command that did take effect answers as a
	// repeat would.
	CodeRequestTimedOut = "REQUEST_TIMED_OUT"
)

// errorStatus is the HTTP status of every error code. Refusals the caller must fix are 4xx;
// only failures that may pass by themselves (an unreachable cluster, a worker that is
// loading, an internal error) are 5xx, because the API's clients retry 5xx and never 4xx.
var errorStatus = map[string]int{
	CodeUnknownClusterMirror:     http.StatusNotFound,
	CodeTopicNotInClusterMirror:  http.StatusNotFound,
	CodeUnknownTopicOrPartition:  http.StatusNotFound,
	CodeUnknownMirrorStateRecord: http.StatusNotFound,

	CodeClusterMirrorAlreadyExists:  http.StatusConflict,
	CodeClusterMirrorNotEmpty:       http.StatusConflict,
	CodeTopicAlreadyInClusterMirror: http.StatusConflict,
	CodeMirrorTopicAlreadyStopped:   http.StatusConflict,
	CodeSourceClusterIDMismatch:     http.StatusConflict,
	CodeMirrorTopicOwnerMismatch:    http.StatusConflict,
	CodeMirrorStateRecordUnreadable: http.StatusConflict,

	CodeInvalidClusterMirrorName:    http.StatusBadRequest,
	CodeInvalidClusterMirrorConfig:  http.StatusBadRequest,
	CodeInvalidMirrorPartitionState: http.StatusBadRequest,
	CodeInvalidTopic:                http.StatusBadRequest,
	CodeInvalidRequest:              http.StatusBadRequest,
	// The source refused the credentials of the request (or of the stored mirror), or is
	// too old: the same request would be refused again, so it is the caller's to fix.
	CodeSaslAuthenticationFailed: http.StatusBadRequest,
	CodeUnsupportedVersion:       http.StatusBadRequest,

	CodeAuthenticationFailed: http.StatusUnauthorized,

	// The worker is a gateway to the clusters: the cluster failed or refused it, not the
	// caller. CLUSTER_AUTHORIZATION_FAILED is the worker's own principal lacking a right on
	// a cluster; a 403 would wrongly blame the API caller.
	CodeSourceClusterUnreachable:   http.StatusBadGateway,
	CodeClusterAuthorizationFailed: http.StatusBadGateway,

	CodeCoordinatorLoadInProgress: http.StatusServiceUnavailable,
	CodeCoordinatorNotAvailable:   http.StatusServiceUnavailable,
	CodeRequestTimedOut:           http.StatusGatewayTimeout,
	CodeUnknownServerError:        http.StatusInternalServerError,
}

// HTTPStatus is the HTTP status the worker's API answers an error code with; a code not
// listed is 400 when its name starts with INVALID_, else 500.
func HTTPStatus(code string) int {
	if s, ok := errorStatus[code]; ok {
		return s
	}
	if strings.HasPrefix(code, "INVALID_") {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}
