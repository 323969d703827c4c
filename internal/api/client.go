package api

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-cleanhttp"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// URL is the worker's base URL, for example "http://127.0.0.1:8080".
	URL string
	// Token is the bearer token every /v1 route requires.
	Token string
	// TLSConfig is used for an https URL; nil means the system roots.
	TLSConfig *tls.Config
	// RetryMax is how many times a request is retried after a connection error or a 5xx
	// answer; 0 means DefaultRetryMax, negative means never.
	RetryMax int
	// RetryWaitMin and RetryWaitMax bound the exponential back-off between attempts;
	// zero means 200ms and 5s.
	RetryWaitMin, RetryWaitMax time.Duration
	// Timeout bounds one attempt; zero means DefaultAttemptTimeout, which outlasts the
	// worker's own bound on a command (CommandTimeout), so a slow command is awaited rather
	// than sent again.
	Timeout time.Duration
	// Logger receives a debug line per retry; nil means silent.
	Logger *slog.Logger
	// UserAgent is sent with every request; empty means "kafkamirror-api-client".
	UserAgent string
}

// DefaultRetryMax is the retry count of a zero ClientConfig.RetryMax.
const DefaultRetryMax = 4

// CommandTimeout is how long a worker works on one command at most before it answers.
const CommandTimeout = 5 * time.Minute

// DefaultAttemptTimeout is the per-attempt timeout of a zero ClientConfig.Timeout.
const DefaultAttemptTimeout = CommandTimeout + time.Minute

// Client calls the worker's HTTP API v1. It retries connection errors and 5xx answers (the
// worker still loading, a cluster unreachable, an internal error) with exponential back-off,
// and never a 4xx: those are refusals that the same request would get again. Every method
// takes a context, which bounds all attempts together. A non-2xx answer is returned as
// *Error. A Client is safe for concurrent use.
//
// Commands are retried like reads. Create and start are idempotent on the worker (the same
// mirror or topic with the same settings answers success), so a retry of one whose first
// answer was lost succeeds; other commands answer a repeat with their "already" error code.
type Client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	token     string
	userAgent string
	rc        *retryablehttp.Client
}

// NewClient checks cfg and returns a client.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(strings.TrimRight(cfg.URL, "/"))
	if err != nil {
		return nil, fmt.Errorf("worker URL %q: %w", cfg.URL, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("worker URL %q: want http://host:port or https://host:port", cfg.URL)
	}
	hc := cleanhttp.DefaultPooledClient()
	hc.Timeout = cfg.Timeout
	if hc.Timeout == 0 {
		hc.Timeout = DefaultAttemptTimeout
	}
	if cfg.TLSConfig != nil {
		hc.Transport.(*http.Transport).TLSClientConfig = cfg.TLSConfig.Clone()
	}
	rc := &retryablehttp.Client{
		HTTPClient:   hc,
		RetryWaitMin: cfg.RetryWaitMin,
		RetryWaitMax: cfg.RetryWaitMax,
		RetryMax:     cfg.RetryMax,
		CheckRetry:   retryablehttp.DefaultRetryPolicy,
		Backoff:      retryablehttp.DefaultBackoff,
		ErrorHandler: keepLastResponse,
	}
	if cfg.Logger != nil {
		rc.Logger = cfg.Logger // *slog.Logger is a retryablehttp.LeveledLogger
	}
	switch {
	case rc.RetryMax == 0:
		rc.RetryMax = DefaultRetryMax
	case rc.RetryMax < 0:
		rc.RetryMax = 0
	}
	if rc.RetryWaitMin == 0 {
		rc.RetryWaitMin = 200 * time.Millisecond
	}
	if rc.RetryWaitMax == 0 {
		rc.RetryWaitMax = 5 * time.Second
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = "kafkamirror-api-client"
	}
	return &Client{base: u.String(), token: cfg.Token, userAgent: ua, rc: rc}, nil
}

// keepLastResponse hands the last answer back when retries are exhausted on a 5xx, so the
// caller gets the worker's error code and message rather than "giving up after N attempts".
func keepLastResponse(resp *http.Response, err error, tries int) (*http.Response, error) {
	if resp != nil {
		return resp, nil
	}
	return nil, fmt.Errorf("kafkamirror worker unreachable after %d attempt(s): %w", tries, err)
}

// CreateMirror creates a cluster mirror.
func (c *Client) CreateMirror(ctx context.Context, req CreateMirrorRequest) (*Mirror, error) {
	var out Mirror
	if err := c.do(ctx, http.MethodPost, "/v1/mirrors", nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// ListMirrors lists every cluster mirror, sorted by name.
func (c *Client) ListMirrors(ctx context.Context) ([]Mirror, error) {
	var out MirrorList
	if err := c.do(ctx, http.MethodGet, "/v1/mirrors", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Mirrors, nil
}

// Group lists the workers of the answering worker's group and their work.
func (c *Client) Group(ctx context.Context) (*Group, error) {
	var out Group
	if err := c.do(ctx, http.MethodGet, "/v1/group", nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// GetMirror describes one cluster mirror.
func (c *Client) GetMirror(ctx context.Context, mirror string) (*Mirror, error) {
	var out Mirror
	if err := c.do(ctx, http.MethodGet, "/v1/mirrors/"+url.PathEscape(mirror), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// UpdateMirror changes a mirror's source connection or sync settings.
func (c *Client) UpdateMirror(ctx context.Context, mirror string, req UpdateMirrorRequest) (*Mirror, error) {
	var out Mirror
	if err := c.do(ctx, http.MethodPatch, "/v1/mirrors/"+url.PathEscape(mirror), nil, req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteMirror deletes a mirror whose topics are all stopped (CLUSTER_MIRROR_NOT_EMPTY
// otherwise).
func (c *Client) DeleteMirror(ctx context.Context, mirror string) error {
	return c.do(ctx, http.MethodDelete, "/v1/mirrors/"+url.PathEscape(mirror), nil, nil, nil)
}

// SourceTopics lists the mirror's source topics matching the regular expression pattern
// (every topic when empty); internal topics are excluded.
func (c *Client) SourceTopics(ctx context.Context, mirror, pattern string) ([]string, error) {
	q := url.Values{}
	if pattern != "" {
		q.Set("pattern", pattern)
	}
	var out SourceTopics
	if err := c.do(ctx, http.MethodGet, "/v1/mirrors/"+url.PathEscape(mirror)+"/source-topics", q, nil, &out); err != nil {
		return nil, err
	}
	return out.Topics, nil
}

// ListSourceTopics lists the topics of a source given by its connection (no mirror needed),
// matching req.Pattern; the worker uses the connection for this listing only.
func (c *Client) ListSourceTopics(ctx context.Context, req SourceTopicsRequest) ([]string, error) {
	var out SourceTopics
	if err := c.do(ctx, http.MethodPost, "/v1/source-topics", nil, req, &out); err != nil {
		return nil, err
	}
	return out.Topics, nil
}

// The topic commands, as TopicCommand names them (the last segment of their route).
const (
	ActionStart  = kip.CommandStart
	ActionStop   = kip.CommandStop
	ActionPause  = kip.CommandPause
	ActionResume = kip.CommandResume
)

// StartTopics starts mirroring topics; divergence is DivergenceFail (or "") or
// DivergenceRecreate. Each result says whether its topic started.
func (c *Client) StartTopics(ctx context.Context, mirror string, topics []string, divergence string) ([]TopicResult, error) {
	return c.TopicCommand(ctx, mirror, ActionStart, TopicsRequest{Topics: topics, Divergence: divergence})
}

// StopTopics fails topics over: mirroring stops and the destination topics become
// writable.
func (c *Client) StopTopics(ctx context.Context, mirror string, topics []string) ([]TopicResult, error) {
	return c.TopicCommand(ctx, mirror, ActionStop, TopicsRequest{Topics: topics})
}

// PauseTopics pauses topics; they stay read-only.
func (c *Client) PauseTopics(ctx context.Context, mirror string, topics []string) ([]TopicResult, error) {
	return c.TopicCommand(ctx, mirror, ActionPause, TopicsRequest{Topics: topics})
}

// ResumeTopics resumes paused topics.
func (c *Client) ResumeTopics(ctx context.Context, mirror string, topics []string) ([]TopicResult, error) {
	return c.TopicCommand(ctx, mirror, ActionResume, TopicsRequest{Topics: topics})
}

// TopicCommand sends a topic command (an Action* constant) with the whole request, for
// callers that name an owner (TopicsRequest.Owner).
func (c *Client) TopicCommand(ctx context.Context, mirror, action string, req TopicsRequest) ([]TopicResult, error) {
	var out TopicResults
	if err := c.do(ctx, http.MethodPost, "/v1/mirrors/"+url.PathEscape(mirror)+"/topics/"+action, nil, req, &out); err != nil {
		return nil, err
	}
	return out.Results, nil
}

// GetTopic describes a mirrored topic with its partitions' states, offsets and lag.
func (c *Client) GetTopic(ctx context.Context, mirror, topic string) (*Topic, error) {
	var out Topic
	path := "/v1/mirrors/" + url.PathEscape(mirror) + "/topics/" + url.PathEscape(topic)
	if err := c.do(ctx, http.MethodGet, path, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// BadStateRecords lists the worker's __mirror_state records that cannot be read.
func (c *Client) BadStateRecords(ctx context.Context) ([]StateRecord, error) {
	var out StateRecords
	if err := c.do(ctx, http.MethodGet, "/v1/state/bad-records", nil, nil, &out); err != nil {
		return nil, err
	}
	return out.Records, nil
}

// StateRecord returns a __mirror_state record with its value.
func (c *Client) StateRecord(ctx context.Context, key string) (*StateRecord, error) {
	var out StateRecord
	if err := c.do(ctx, http.MethodGet, stateRecordPath(key), nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// RemoveStateRecord removes a __mirror_state record that cannot be read; force removes a
// readable partition or lastmirror record too.
func (c *Client) RemoveStateRecord(ctx context.Context, key string, force bool) error {
	var q url.Values
	if force {
		q = url.Values{"force": {"true"}}
	}
	return c.do(ctx, http.MethodDelete, stateRecordPath(key), q, nil, nil)
}

// stateRecordPath escapes each '/'-separated part of a key, so the key stays one route
// wildcard whatever its names hold.
func stateRecordPath(key string) string {
	parts := strings.Split(key, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return "/v1/state/records/" + strings.Join(parts, "/")
}

// Healthy returns nil when the worker process answers (liveness).
func (c *Client) Healthy(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/healthz", nil, nil, nil)
}

// Ready returns nil when the worker is ready (its __mirror_state is loaded). A worker that
// is still loading answers 503, which is retried like any 5xx.
func (c *Client) Ready(ctx context.Context) error {
	return c.do(ctx, http.MethodGet, "/readyz", nil, nil, nil)
}

// maxResponse bounds what the client reads of an answer; a describe of a topic with
// thousands of partitions stays far below it.
const maxResponse = 64 << 20

func (c *Client) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	// path is already escaped (url.PathEscape of every name), so it is appended as text:
	// a name such as "a/b" must stay one escaped segment, not become two.
	target := c.base + path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	var body any
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encoding the %s %s request: %w", method, path, err)
		}
		body = b // []byte: retryablehttp rewinds it for every attempt
	}
	req, err := retryablehttp.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if strings.HasPrefix(path, "/v1/") {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.rc.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse))
	if err != nil {
		return fmt.Errorf("%s %s: reading the answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp.StatusCode, data)
	}
	if out == nil || len(data) == 0 {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("%s %s: decoding the answer: %w", method, path, err)
	}
	return nil
}

func decodeError(status int, data []byte) error {
	var body ErrorBody
	if json.Unmarshal(data, &body) == nil && body.ErrorCode != "" {
		return &Error{Status: status, Code: body.ErrorCode, Message: body.Message}
	}
	msg := strings.TrimSpace(string(data))
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	if msg == "" {
		msg = http.StatusText(status)
	}
	return &Error{Status: status, Message: msg}
}
