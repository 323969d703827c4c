package api

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// The error codes of the API: the KIP-1279 (and Kafka) error names the engine uses, plus the
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

	// CodeAuthenticationFailed: no or a wrong bearer token (401).
	CodeAuthenticationFailed = "AUTHENTICATION_FAILED"
	// CodeCoordinatorLoadInProgress: the worker is still loading __mirror_state (503), the
	// Kafka name for a coordinator that is not ready yet. Clients retry it.
	CodeCoordinatorLoadInProgress = "COORDINATOR_LOAD_IN_PROGRESS"
	// CodeMirrorTopicOwnerMismatch: a command for a topic that another owner manages
	// (TopicsRequest.Owner) (409).
	CodeMirrorTopicOwnerMismatch = "MIRROR_TOPIC_OWNER_MISMATCH"
	// CodeMirrorStateRecordUnreadable: a command on a mirror or topic whose __mirror_state
	// record cannot be read, until the operator removes it (409).
	CodeMirrorStateRecordUnreadable = "MIRROR_STATE_RECORD_UNREADABLE"
	// CodeUnknownMirrorStateRecord: no __mirror_state record has the key (404).
	CodeUnknownMirrorStateRecord = "UNKNOWN_MIRROR_STATE_RECORD"
	// CodeCoordinatorNotAvailable: the destination cluster did not answer for __mirror_state
	// within the command bound (10 s), so the command recorded nothing and did not take
	// effect (503). Clients retry it.
	CodeCoordinatorNotAvailable = "COORDINATOR_NOT_AVAILABLE"
	// CodeRequestTimedOut: the destination cluster did not acknowledge a command's
	// __mirror_state record within the command bound, so the command may or may not have
	// taken effect (504). Clients retry it; a retry of a command that did take effect answers
	// as a repeat would.
	CodeRequestTimedOut = "REQUEST_TIMED_OUT"
)

// StatusFor is the HTTP status the worker answers an error code with. It is part of the
// contract because the client's retry rule depends on it: 5xx is retried, 4xx never.
// Refusals the caller must fix are 4xx; only failures that may pass by themselves (an
// unreachable cluster, a worker that is loading, an internal error) are 5xx.
func StatusFor(code string) int {
	switch code {
	case CodeUnknownClusterMirror, CodeTopicNotInClusterMirror, CodeUnknownTopicOrPartition, CodeUnknownMirrorStateRecord:
		return http.StatusNotFound
	case CodeClusterMirrorAlreadyExists, CodeClusterMirrorNotEmpty, CodeTopicAlreadyInClusterMirror,
		CodeMirrorTopicAlreadyStopped, CodeSourceClusterIDMismatch, CodeMirrorTopicOwnerMismatch, CodeMirrorStateRecordUnreadable:
		return http.StatusConflict
	case CodeSaslAuthenticationFailed, CodeUnsupportedVersion:
		// The source refused the credentials of the request (or of the stored mirror):
		// the same request would be refused again, so it is the caller's to fix.
		return http.StatusBadRequest
	case CodeAuthenticationFailed:
		return http.StatusUnauthorized
	case CodeSourceClusterUnreachable, CodeClusterAuthorizationFailed:
		// The worker is a gateway to the clusters: the cluster failed or refused it, not
		// the caller. CLUSTER_AUTHORIZATION_FAILED is the worker's own principal lacking a
		// right on a cluster; a 403 would wrongly blame the API caller.
		return http.StatusBadGateway
	case CodeCoordinatorLoadInProgress, CodeCoordinatorNotAvailable:
		return http.StatusServiceUnavailable
	case CodeRequestTimedOut:
		return http.StatusGatewayTimeout
	}
	if strings.HasPrefix(code, "INVALID_") {
		return http.StatusBadRequest
	}
	return http.StatusInternalServerError
}

// ErrorBody is the JSON body of every non-2xx answer.
type ErrorBody struct {
	ErrorCode string `json:"error_code"`
	Message   string `json:"message"`
}

// Error is a request the worker refused or failed (a non-2xx answer), or a failed topic of
// a topic command (Status 0).
type Error struct {
	// Status is the HTTP status; 0 for a per-topic result.
	Status int
	// Code is the error name (the Code* constants); empty when the answer had no error body
	// (for example from a proxy in front of the worker).
	Code    string
	Message string
}

// Error formats the status, code and message.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("kafkamirror worker: ")
	if e.Status != 0 {
		fmt.Fprintf(&b, "HTTP %d: ", e.Status)
	}
	if e.Code != "" {
		b.WriteString(e.Code)
		b.WriteString(": ")
	}
	b.WriteString(e.Message)
	return b.String()
}

// IsCode reports whether err is (or wraps) an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}
