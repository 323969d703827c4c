package api

import (
	"errors"
	"fmt"
	"strings"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// The error codes of the API: the KIP vocabulary's (internal/kip), where each is explained.
const (
	CodeUnknownClusterMirror        = kip.CodeUnknownClusterMirror
	CodeClusterMirrorAlreadyExists  = kip.CodeClusterMirrorAlreadyExists
	CodeClusterMirrorNotEmpty       = kip.CodeClusterMirrorNotEmpty
	CodeInvalidClusterMirrorName    = kip.CodeInvalidClusterMirrorName
	CodeInvalidClusterMirrorConfig  = kip.CodeInvalidClusterMirrorConfig
	CodeTopicAlreadyInClusterMirror = kip.CodeTopicAlreadyInClusterMirror
	CodeTopicNotInClusterMirror     = kip.CodeTopicNotInClusterMirror
	CodeInvalidMirrorPartitionState = kip.CodeInvalidMirrorPartitionState
	CodeMirrorTopicAlreadyStopped   = kip.CodeMirrorTopicAlreadyStopped
	CodeSourceClusterIDMismatch     = kip.CodeSourceClusterIDMismatch
	CodeSourceClusterUnreachable    = kip.CodeSourceClusterUnreachable
	CodeSaslAuthenticationFailed    = kip.CodeSaslAuthenticationFailed
	CodeUnknownTopicOrPartition     = kip.CodeUnknownTopicOrPartition
	CodeInvalidTopic                = kip.CodeInvalidTopic
	CodeInvalidRequest              = kip.CodeInvalidRequest
	CodeClusterAuthorizationFailed  = kip.CodeClusterAuthorizationFailed
	CodeUnknownServerError          = kip.CodeUnknownServerError
	CodeUnsupportedVersion          = kip.CodeUnsupportedVersion
	CodeAuthenticationFailed        = kip.CodeAuthenticationFailed
	CodeCoordinatorLoadInProgress   = kip.CodeCoordinatorLoadInProgress
	CodeMirrorTopicOwnerMismatch    = kip.CodeMirrorTopicOwnerMismatch
	CodeMirrorStateRecordUnreadable = kip.CodeMirrorStateRecordUnreadable
	CodeUnknownMirrorStateRecord    = kip.CodeUnknownMirrorStateRecord
	CodeCoordinatorNotAvailable     = kip.CodeCoordinatorNotAvailable
	CodeRequestTimedOut             = kip.CodeRequestTimedOut
)

// StatusFor is the HTTP status the worker answers an error code with. It is part of the
// contract because the client's retry rule depends on it: 5xx is retried, 4xx never.
func StatusFor(code string) int { return kip.HTTPStatus(code) }

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
