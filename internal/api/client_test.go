package api

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func newTestClient(t *testing.T, url string, mod ...func(*ClientConfig)) *Client {
	t.Helper()
	cfg := ClientConfig{URL: url, Token: "tok-123", RetryMax: 3, RetryWaitMin: time.Millisecond, RetryWaitMax: 5 * time.Millisecond}
	for _, m := range mod {
		m(&cfg)
	}
	c, err := NewClient(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func writeBody(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func TestClientSendsTokenAndDecodes(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got := r.Header.Get("Authorization"); got != "Bearer tok-123" {
			writeBody(w, 401, ErrorBody{CodeAuthenticationFailed, "got " + got})
			return
		}
		if r.Method != http.MethodPost || r.URL.Path != "/v1/mirrors" || r.Header.Get("Content-Type") != "application/json" {
			writeBody(w, 400, ErrorBody{CodeInvalidRequest, r.Method + " " + r.URL.Path})
			return
		}
		var req CreateMirrorRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			writeBody(w, 400, ErrorBody{CodeInvalidRequest, err.Error()})
			return
		}
		writeBody(w, 201, Mirror{Name: req.Name, Source: SourceConnection{BootstrapServers: req.Source.BootstrapServers}, SourceClusterID: "src", TopicCount: 0})
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL+"/") // a trailing slash must not double the path's
	m, err := c.CreateMirror(context.Background(), CreateMirrorRequest{Name: "m", Source: SourceConnection{BootstrapServers: []string{"h:1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if m.Name != "m" || m.SourceClusterID != "src" || len(m.Source.BootstrapServers) != 1 {
		t.Fatalf("decoded %+v", m)
	}
}

// TestClientSendsJSONContentType: the worker answers 415 to a body of another type, so every
// request with a body must declare application/json.
func TestClientSendsJSONContentType(t *testing.T) {
	var bodies atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if len(body) > 0 {
			bodies.Add(1)
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				writeBody(w, 415, ErrorBody{CodeInvalidRequest, r.Method + " " + r.URL.Path + " with Content-Type " + ct})
				return
			}
		}
		writeBody(w, 200, map[string]any{})
	}))
	defer srv.Close()
	c, ctx := newTestClient(t, srv.URL), context.Background()
	calls := []func() error{
		func() error { _, err := c.CreateMirror(ctx, CreateMirrorRequest{Name: "m"}); return err },
		func() error { _, err := c.UpdateMirror(ctx, "m", UpdateMirrorRequest{}); return err },
		func() error { _, err := c.StartTopics(ctx, "m", []string{"t"}, ""); return err },
		func() error { _, err := c.StopTopics(ctx, "m", []string{"t"}); return err },
		func() error { _, err := c.PauseTopics(ctx, "m", []string{"t"}); return err },
		func() error { _, err := c.ResumeTopics(ctx, "m", []string{"t"}); return err },
		func() error { _, err := c.ListSourceTopics(ctx, SourceTopicsRequest{}); return err },
	}
	for _, call := range calls {
		if err := call(); err != nil {
			t.Error(err)
		}
	}
	if n := bodies.Load(); n != int32(len(calls)) {
		t.Fatalf("%d requests had a body, want %d", n, len(calls))
	}
}

func TestClientRetriesServerErrorsAndResendsTheBody(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req TopicsRequest
		if err := json.Unmarshal(body, &req); err != nil || len(req.Topics) != 2 {
			writeBody(w, 400, ErrorBody{CodeInvalidRequest, "body not re-sent: " + string(body)})
			return
		}
		if attempts.Add(1) < 3 {
			writeBody(w, 503, ErrorBody{CodeCoordinatorLoadInProgress, "loading"})
			return
		}
		writeBody(w, 200, TopicResults{Results: []TopicResult{{Topic: "a"}, {Topic: "b", ErrorCode: CodeTopicAlreadyInClusterMirror, Message: "busy"}}})
	}))
	defer srv.Close()
	res, err := newTestClient(t, srv.URL).StartTopics(context.Background(), "m", []string{"a", "b"}, DivergenceFail)
	if err != nil {
		t.Fatal(err)
	}
	if n := attempts.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3 (two 503 retried)", n)
	}
	if res[0].Err() != nil || !IsCode(res[1].Err(), CodeTopicAlreadyInClusterMirror) {
		t.Fatalf("results %+v", res)
	}
}

func TestClientNeverRetriesClientErrors(t *testing.T) {
	for _, status := range []int{400, 401, 404, 409, 413, 415} {
		var attempts atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			attempts.Add(1)
			writeBody(w, status, ErrorBody{CodeUnknownClusterMirror, "no such mirror"})
		}))
		_, err := newTestClient(t, srv.URL).GetMirror(context.Background(), "m")
		srv.Close()
		var ae *Error
		if !errors.As(err, &ae) || ae.Status != status || ae.Code != CodeUnknownClusterMirror || ae.Message != "no such mirror" {
			t.Fatalf("status %d: error %#v", status, err)
		}
		if n := attempts.Load(); n != 1 {
			t.Fatalf("status %d: %d attempts, want 1", status, n)
		}
	}
}

// TestClientAuthenticationFailureIsAnsweredOnce: a source that refuses the credentials
// refuses them again, so the worker's SASL_AUTHENTICATION_FAILED comes back after one
// attempt, with its message.
func TestClientAuthenticationFailureIsAnsweredOnce(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeBody(w, StatusFor(CodeSaslAuthenticationFailed), ErrorBody{CodeSaslAuthenticationFailed, "authentication failed: SCRAM-SHA-512 user \"u\""})
	}))
	defer srv.Close()
	_, err := newTestClient(t, srv.URL).CreateMirror(context.Background(), CreateMirrorRequest{Name: "m"})
	if !IsCode(err, CodeSaslAuthenticationFailed) || !strings.Contains(err.Error(), "authentication failed") {
		t.Fatalf("error %v", err)
	}
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts, want 1", n)
	}
}

// TestClientTopicCommandSendsTheOwner: the owner and the release travel in the body.
func TestClientTopicCommandSendsTheOwner(t *testing.T) {
	var got TopicsRequest
	var path string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		path = r.URL.Path
		_ = json.NewDecoder(r.Body).Decode(&got)
		writeBody(w, 200, TopicResults{Results: []TopicResult{{Topic: "t"}}})
	}))
	defer srv.Close()
	want := TopicsRequest{Topics: []string{"t"}, Owner: "o-1", Release: true}
	if _, err := newTestClient(t, srv.URL).TopicCommand(context.Background(), "m", ActionStop, want); err != nil {
		t.Fatal(err)
	}
	if path != "/v1/mirrors/m/topics/stop" || got.Owner != want.Owner || !got.Release || len(got.Topics) != 1 {
		t.Fatalf("POST %s %+v", path, got)
	}
}

func TestClientReturnsTheLastServerErrorWhenRetriesRunOut(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1)
		writeBody(w, 502, ErrorBody{CodeSourceClusterUnreachable, "source down"})
	}))
	defer srv.Close()
	err := newTestClient(t, srv.URL).DeleteMirror(context.Background(), "m")
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != 502 || ae.Code != CodeSourceClusterUnreachable {
		t.Fatalf("error %#v", err)
	}
	if n := attempts.Load(); n != 4 {
		t.Fatalf("%d attempts, want 1 + RetryMax 3", n)
	}
}

func TestClientRetriesConnectionErrors(t *testing.T) {
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			// Drop the connection without an answer, as a crashing worker would.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		writeBody(w, 200, MirrorList{Mirrors: []Mirror{{Name: "m"}}})
	}))
	defer srv.Close()
	ms, err := newTestClient(t, srv.URL).ListMirrors(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(ms) != 1 || attempts.Load() != 2 {
		t.Fatalf("mirrors %+v after %d attempts", ms, attempts.Load())
	}

	// Nothing listening at all: an error (not an *Error) after the retries.
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL
	dead.Close()
	_, err = newTestClient(t, url).ListMirrors(context.Background())
	var ae *Error
	if err == nil || errors.As(err, &ae) {
		t.Fatalf("error %#v, want a connection error", err)
	}
}

func TestClientContextEndsRetries(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeBody(w, 503, ErrorBody{CodeCoordinatorLoadInProgress, "loading"})
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL, func(cfg *ClientConfig) {
		cfg.RetryMax, cfg.RetryWaitMin, cfg.RetryWaitMax = 10, time.Minute, time.Minute
	})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	err := c.Ready(ctx)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("error %v, want the context's", err)
	}
	if d := time.Since(start); d > 30*time.Second {
		t.Fatalf("took %v: the back-off ignored the context", d)
	}
}

func TestClientEscapesNamesAndQuery(t *testing.T) {
	var gotPath, gotPattern string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotPath, gotPattern = r.URL.EscapedPath(), r.URL.Query().Get("pattern")
		writeBody(w, 200, SourceTopics{Topics: []string{"x"}})
	}))
	defer srv.Close()
	c := newTestClient(t, srv.URL)
	if _, err := c.SourceTopics(context.Background(), "a/b c", "^orders\\..*&x=1"); err != nil {
		t.Fatal(err)
	}
	if gotPath != "/v1/mirrors/a%2Fb%20c/source-topics" || gotPattern != "^orders\\..*&x=1" {
		t.Fatalf("path %q pattern %q", gotPath, gotPattern)
	}
	if _, err := c.GetTopic(context.Background(), "m", "t/1"); err != nil {
		t.Fatal(err)
	}
	if gotPath != "/v1/mirrors/m/topics/t%2F1" {
		t.Fatalf("path %q", gotPath)
	}
}

func TestClientTLS(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeBody(w, 200, Health{Status: "ok"})
	}))
	defer srv.Close()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	c := newTestClient(t, srv.URL, func(cfg *ClientConfig) { cfg.TLSConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12} })
	if err := c.Ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Without the CA the certificate is refused, and that is not retried.
	if err := newTestClient(t, srv.URL).Ready(context.Background()); err == nil {
		t.Fatal("an untrusted certificate was accepted")
	}
}

func TestClientNonJSONError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "blocked by proxy", http.StatusForbidden)
	}))
	defer srv.Close()
	_, err := newTestClient(t, srv.URL).ListMirrors(context.Background())
	var ae *Error
	if !errors.As(err, &ae) || ae.Status != 403 || ae.Code != "" || ae.Message != "blocked by proxy" {
		t.Fatalf("error %#v", err)
	}
}

func TestNewClientRejectsBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://h", "http://"} {
		if _, err := NewClient(ClientConfig{URL: u}); err == nil {
			t.Errorf("URL %q accepted", u)
		}
	}
}
