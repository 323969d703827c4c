package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// The worker's parsers of input from outside: API request bodies and the YAML
// configuration. `go test` runs the seed corpora in testdata/fuzz; `go test -fuzz`
// explores from them.

// acceptingEngine accepts every command the API hands it, checking that the server let
// through only what it validates itself. The methods no fuzzed route calls are the nil
// embedded interface's.
type acceptingEngine struct {
	engineAPI
	t      *testing.T
	called bool
}

func (e *acceptingEngine) checkSource(src mirrorstate.SourceConnection) {
	for _, hp := range src.BootstrapServers {
		if err := api.CheckBrokerAddress(hp); err != nil {
			e.t.Fatalf("the server let through bootstrap server %q: %v", hp, err)
		}
	}
}

func (e *acceptingEngine) CreateClusterMirror(_ context.Context, m mirrorstate.MirrorRecord) (mirrorstate.MirrorRecord, error) {
	e.called = true
	if err := partitionstate.ValidateMirrorName(m.Name); err != nil {
		e.t.Fatalf("the server let through mirror name %q: %v", m.Name, err)
	}
	if len(m.Source.BootstrapServers) == 0 {
		e.t.Fatal("the server let through a mirror without bootstrap servers")
	}
	e.checkSource(m.Source)
	return m, nil
}

func (e *acceptingEngine) UpdateClusterMirror(_ context.Context, m mirrorstate.MirrorRecord) (mirrorstate.MirrorRecord, error) {
	e.called = true
	e.checkSource(m.Source)
	return m, nil
}

func (e *acceptingEngine) DescribeClusterMirror(name string) (mirrorengine.MirrorDescription, error) {
	return mirrorengine.MirrorDescription{Name: name}, nil
}

func (e *acceptingEngine) ListSourceTopics(_ context.Context, src mirrorstate.SourceConnection, _ string) ([]string, error) {
	e.called = true
	if len(src.BootstrapServers) == 0 {
		e.t.Fatal("the server let through a source without bootstrap servers")
	}
	e.checkSource(src)
	return []string{"t"}, nil
}

func (e *acceptingEngine) TopicOwner(string) (string, bool) { return "", false }

func (e *acceptingEngine) SetTopicOwner(context.Context, string, string) error { return nil }

func (e *acceptingEngine) topics(mirror string, topics []string) ([]mirrorengine.TopicResult, error) {
	e.called = true
	if err := partitionstate.ValidateMirrorName(mirror); err != nil || len(topics) == 0 {
		e.t.Fatalf("the server let through mirror %q (%v) with %d topics", mirror, err, len(topics))
	}
	out := make([]mirrorengine.TopicResult, len(topics))
	for i, t := range topics {
		out[i].Topic = t
	}
	return out, nil
}

func (e *acceptingEngine) StartMirrorTopics(_ context.Context, mirror string, topics []string, _ string) ([]mirrorengine.TopicResult, error) {
	return e.topics(mirror, topics)
}

func (e *acceptingEngine) StopMirrorTopics(_ context.Context, mirror string, topics []string) ([]mirrorengine.TopicResult, error) {
	return e.topics(mirror, topics)
}

func (e *acceptingEngine) PromoteMirrorTopics(_ context.Context, mirror string, topics []string, _ time.Duration) ([]mirrorengine.TopicResult, error) {
	return e.topics(mirror, topics)
}

func (e *acceptingEngine) PauseMirrorTopics(_ context.Context, mirror string, topics []string) ([]mirrorengine.TopicResult, error) {
	return e.topics(mirror, topics)
}

func (e *acceptingEngine) ResumeMirrorTopics(_ context.Context, mirror string, topics []string) ([]mirrorengine.TopicResult, error) {
	return e.topics(mirror, topics)
}

// The routes that read a JSON body; %s is the {mirror} path value.
var bodyRoutes = []struct{ method, path string }{
	{http.MethodPost, "/v1/mirrors"},
	{http.MethodPatch, "/v1/mirrors/%s"},
	{http.MethodPost, "/v1/mirrors/%s/topics/start"},
	{http.MethodPost, "/v1/mirrors/%s/topics/stop"},
	{http.MethodPost, "/v1/mirrors/%s/topics/pause"},
	{http.MethodPost, "/v1/mirrors/%s/topics/resume"},
	{http.MethodPost, "/v1/source-topics"},
}

// FuzzAPIRequest sends request bodies through the server's decoding and validation:
// anything it does not accept is a 4xx with a JSON error body, never a 5xx or a panic.
// The high bit of route says whether the worker has a secret key.
func FuzzAPIRequest(f *testing.F) {
	const token = "fuzz-token-0123456789"
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	f.Fuzz(func(t *testing.T, route uint8, mirror, contentType string, body []byte) {
		rt := bodyRoutes[int(route&0x7f)%len(bodyRoutes)]
		eng := &acceptingEngine{t: t}
		slot := &engineSlot{}
		slot.set(eng)
		s := newServer(token, route&0x80 != 0, log, slot, nil)
		req := httptest.NewRequest(rt.method, strings.Replace(rt.path, "%s", url.PathEscape(mirror), 1), bytes.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		if contentType != "" {
			req.Header.Set("Content-Type", contentType)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, req)

		status := w.Code
		switch {
		case status >= 500:
			t.Fatalf("%s %s %q: %d %s", rt.method, req.URL.Path, body, status, w.Body)
		case status >= 400:
			var e api.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.ErrorCode == "" || e.Message == "" {
				t.Fatalf("refusal %d without a JSON error body: %q (%v)", status, w.Body, err)
			}
			if eng.called {
				t.Fatalf("refused with %d after the engine ran", status)
			}
		case !eng.called:
			t.Fatalf("%d without the engine running", status)
		case !json.Valid(w.Body.Bytes()):
			t.Fatalf("answer %d is not JSON: %q", status, w.Body)
		}
	})
}

// FuzzConfig loads YAML configuration files and validates the result: any input is a
// configuration or an invalid configuration error, never a panic. The files that settings
// name are all replaced by one holding pem, so that the fuzzer never reads the machine's
// files (a setting naming /dev/zero would read for ever).
func FuzzConfig(f *testing.F) {
	none := func(string) (string, bool) { return "", false }
	dir := f.TempDir() // a fuzzing process runs one input at a time
	path, pemPath := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "file.pem")
	f.Fuzz(func(t *testing.T, yaml, pem []byte) {
		if os.WriteFile(path, yaml, 0o600) != nil || os.WriteFile(pemPath, pem, 0o600) != nil {
			t.Fatal("writing the files")
		}
		cfg, err := loadConfig(nil, path, none)
		if err != nil {
			mustBeConfigError(t, err)
			return
		}
		for _, file := range []*string{&cfg.Destination.TLS.CAFile, &cfg.Destination.TLS.CertFile, &cfg.Destination.TLS.KeyFile, &cfg.API.CertFile, &cfg.API.KeyFile} {
			if *file != "" {
				*file = pemPath
			}
		}
		for _, embedded := range []bool{false, true} {
			if err := cfg.validate(embedded); err != nil {
				mustBeConfigError(t, err)
			}
		}
	})
}

func mustBeConfigError(t *testing.T, err error) {
	t.Helper()
	var ce *configError
	if !errors.As(err, &ce) {
		t.Fatalf("%v (%T) is not an invalid configuration error", err, err)
	}
}
