package main

// The HTTP API v1 (docs/design.md's route table; the wire types are in internal/api).

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/membership"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// maxBody bounds request bodies: a mirror definition with PEM certificates is a few KiB.
const maxBody = 1 << 20

// engineAPI is the part of *mirrorengine.Engine the API uses.
type engineAPI interface {
	CreateClusterMirror(ctx context.Context, m mirrorstate.MirrorRecord) (mirrorstate.MirrorRecord, error)
	UpdateClusterMirror(ctx context.Context, m mirrorstate.MirrorRecord) (mirrorstate.MirrorRecord, error)
	DeleteClusterMirror(ctx context.Context, name string) error
	ListClusterMirrors() []mirrorengine.MirrorDescription
	DescribeClusterMirror(name string) (mirrorengine.MirrorDescription, error)
	SourceTopics(ctx context.Context, mirror, pattern string) ([]string, error)
	ListSourceTopics(ctx context.Context, conn mirrorstate.SourceConnection, pattern string) ([]string, error)
	TopicOwner(topic string) (owner string, ok bool)
	SetTopicOwner(ctx context.Context, topic, owner string) error
	StartMirrorTopics(ctx context.Context, mirror string, topics []string, divergence string) ([]mirrorengine.TopicResult, error)
	StopMirrorTopics(ctx context.Context, mirror string, topics []string) ([]mirrorengine.TopicResult, error)
	PromoteMirrorTopics(ctx context.Context, mirror string, topics []string, timeout time.Duration) ([]mirrorengine.TopicResult, error)
	PauseMirrorTopics(ctx context.Context, mirror string, topics []string) ([]mirrorengine.TopicResult, error)
	ResumeMirrorTopics(ctx context.Context, mirror string, topics []string) ([]mirrorengine.TopicResult, error)
	DescribeMirrorTopic(ctx context.Context, mirror, topic string) (mirrorengine.TopicDescription, error)
	DescribeMirrorTopics(ctx context.Context, mirror string) ([]mirrorengine.TopicDescription, error)
	PartitionStates() map[partitionstate.State]int
	StalledPartitions() []mirrorengine.StalledPartition
	BadStateRecords() []mirrorstate.StateRecord
	StateRecord(key string) (mirrorstate.StateRecord, error)
	RemoveStateRecord(ctx context.Context, key string, force bool) error
	RefreshForCommand(ctx context.Context) *mirrorengine.CommandError
}

// engineSlot holds the engine once it is open; the API answers 503 until then.
type engineSlot struct {
	eng     atomic.Pointer[engineBox]
	waiting atomic.Pointer[string] // why it is not open yet
}

type engineBox struct{ e engineAPI }

func (s *engineSlot) get() engineAPI {
	if b := s.eng.Load(); b != nil {
		return b.e
	}
	return nil
}

func (s *engineSlot) set(e engineAPI) { s.eng.Store(&engineBox{e}) }

func (s *engineSlot) setWaiting(why string) { s.waiting.Store(&why) }

func (s *engineSlot) waitingFor() string {
	if w := s.waiting.Load(); w != nil {
		return *w
	}
	return "loading __mirror_state"
}

// server is the worker's HTTP handler.
type server struct {
	tokenHash [sha256.Size]byte
	log       *slog.Logger
	slot      *engineSlot
	mux       *http.ServeMux
	// canSeal is whether a secret key is configured, so that a mirror with secrets is
	// refused up front with a 400 naming the setting instead of failing in the store.
	canSeal bool
	// ownerMu makes a topic command's owner check, the command and the owner's record one
	// step (api.TopicsRequest.Owner).
	ownerMu sync.Mutex
	// group, when set, is the worker's group membership: commands that change
	// __mirror_state are applied by the worker that owns the commands unit, and the others
	// forward them there.
	group *group
}

func newServer(token string, canSeal bool, log *slog.Logger, slot *engineSlot, metrics http.Handler) *server {
	s := &server{tokenHash: sha256.Sum256([]byte(token)), canSeal: canSeal, log: log, slot: slot, mux: http.NewServeMux()}
	m := s.mux
	m.Handle("POST /v1/mirrors", s.v1(s.createMirror))
	m.Handle("GET /v1/mirrors", s.v1(s.listMirrors))
	m.Handle("GET /v1/mirrors/{mirror}", s.v1(s.getMirror))
	m.Handle("PATCH /v1/mirrors/{mirror}", s.v1(s.updateMirror))
	m.Handle("DELETE /v1/mirrors/{mirror}", s.v1(s.deleteMirror))
	m.Handle("GET /v1/mirrors/{mirror}/source-topics", s.v1(s.sourceTopics))
	m.Handle("POST /v1/source-topics", s.v1(s.listSourceTopics))
	for _, action := range []string{"start", "stop", "pause", "resume"} {
		m.Handle("POST /v1/mirrors/{mirror}/topics/"+action, s.v1(s.topicCommand(action)))
	}
	m.Handle("GET /v1/mirrors/{mirror}/topics/{topic}", s.v1(s.getTopic))
	m.Handle("GET /v1/state/bad-records", s.v1(s.badStateRecords))
	m.Handle("GET /v1/state/records/{key...}", s.v1(s.getStateRecord))
	m.Handle("DELETE /v1/state/records/{key...}", s.v1(s.removeStateRecord))
	m.Handle("GET /v1/group", s.v1(s.getGroup))
	m.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
	})
	m.HandleFunc("GET /readyz", s.readyz)
	if metrics != nil {
		m.Handle("GET /metrics", metrics)
	}
	return s
}

// ServeHTTP routes, turning the mux's plain-text 404 and 405 into JSON errors.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
	defer func() {
		// No headers, query values or bodies: they may carry the token or secrets.
		s.log.Debug("http request", "method", r.Method, "path", r.URL.Path, "status", rec.status, "duration", time.Since(start))
	}()
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(rec, r)
		return
	}
	s.mux.ServeHTTP(rec, r)
}

func (s *server) noRoute(w http.ResponseWriter, r *http.Request) {
	// Unknown /v1 paths need the token too, so the route table cannot be probed without it.
	if strings.HasPrefix(r.URL.Path, "/v1/") && !s.authorized(r) {
		s.unauthorized(w)
		return
	}
	var allowed []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPatch, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			allowed = append(allowed, m)
		}
	}
	if len(allowed) > 0 {
		w.Header().Set("Allow", strings.Join(allowed, ", "))
		writeError(w, &api.Error{Status: http.StatusMethodNotAllowed, Code: api.CodeInvalidRequest,
			Message: fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, strings.Join(allowed, ", "))})
		return
	}
	writeError(w, &api.Error{Status: http.StatusNotFound, Code: api.CodeInvalidRequest, Message: fmt.Sprintf("no route %s %s", r.Method, r.URL.Path)})
}

// authorized checks the bearer token in constant time. Both sides are hashed first so
// that not even the token's length leaks through timing.
func (s *server) authorized(r *http.Request) bool {
	auth := r.Header.Get("Authorization")
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) == 1
}

func (s *server) unauthorized(w http.ResponseWriter) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="kafkamirror"`)
	writeError(w, &api.Error{Status: http.StatusUnauthorized, Code: api.CodeAuthenticationFailed,
		Message: "missing or wrong bearer token (Authorization: Bearer <KAFKAMIRROR_API_TOKEN>)"})
}

type v1Handler func(w http.ResponseWriter, r *http.Request, e engineAPI) error

// v1 wraps a /v1 handler: token, then readiness, then the handler, whose error becomes
// the JSON error answer.
func (s *server) v1(h v1Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(r) {
			s.unauthorized(w)
			return
		}
		e := s.slot.get()
		if e == nil {
			w.Header().Set("Retry-After", "1")
			writeError(w, &api.Error{Status: http.StatusServiceUnavailable, Code: api.CodeCoordinatorLoadInProgress,
				Message: "the worker is not ready: " + s.slot.waitingFor()})
			return
		}
		if s.group != nil && changesState(r) {
			arrived := time.Now()
			done, owner, err := s.group.beginCommand(r.Context(), r.Header.Get(forwardedHeader) != "")
			switch {
			case err != nil:
				commandsUnavailable(w, err.Error())
				return
			case owner != "":
				s.forward(w, r, owner)
				return
			}
			defer done()
			// The previous owner's last writes are acknowledged: read them before deciding.
			if cerr := e.RefreshForCommand(mirrorengine.CommandArrived(r.Context(), arrived)); cerr != nil {
				s.fail(w, r, cerr)
				return
			}
		}
		if err := h(w, r, e); err != nil {
			s.fail(w, r, err)
		}
	})
}

// changesState reports whether a /v1 request is a command that changes __mirror_state.
func changesState(r *http.Request) bool {
	return r.Method != http.MethodGet && r.URL.Path != "/v1/source-topics"
}

func (s *server) fail(w http.ResponseWriter, r *http.Request, err error) {
	var ae *api.Error
	var ce *mirrorengine.CommandError
	switch {
	case errors.As(err, &ae):
	case errors.As(err, &ce):
		ae = &api.Error{Status: api.StatusFor(ce.Code), Code: ce.Code, Message: ce.Message}
	default:
		ae = &api.Error{Status: http.StatusInternalServerError, Code: api.CodeUnknownServerError, Message: err.Error()}
	}
	if ae.Status == 0 {
		ae.Status = api.StatusFor(ae.Code)
	}
	if ae.Status >= 500 {
		s.log.Warn("API request failed", "method", r.Method, "path", r.URL.Path, "status", ae.Status, "error_code", ae.Code, "message", ae.Message)
	}
	writeError(w, ae)
}

func (s *server) readyz(w http.ResponseWriter, _ *http.Request) {
	why := ""
	switch {
	case s.slot.get() == nil:
		why = s.slot.waitingFor()
	case s.group != nil:
		why = s.group.notReady()
	}
	if why != "" {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, http.StatusServiceUnavailable, api.Health{Status: "unavailable", Message: why})
		return
	}
	writeJSON(w, http.StatusOK, api.Health{Status: "ok"})
}

// commandContext detaches a command from the request: a client that gives up (a timeout, a
// dropped connection) must not abort a multi-topic command half-way through. It notes the
// command's arrival, before it queues behind others (mirrorengine.CommandArrived).
func commandContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx := mirrorengine.CommandArrived(context.WithoutCancel(r.Context()), time.Now())
	return context.WithTimeout(ctx, api.CommandTimeout)
}

func (s *server) createMirror(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	var req api.CreateMirrorRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := partitionstate.ValidateMirrorName(req.Name); err != nil {
		return badRequest(api.CodeInvalidClusterMirrorName, "%v", err)
	}
	if err := s.checkSource(req.Source); err != nil {
		return err
	}
	sync, err := syncFromAPI(req.Sync)
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(r)
	defer cancel()
	dt, err := destinationTopicsFromAPI(req.DestinationTopics)
	if err != nil {
		return err
	}
	rec := mirrorstate.MirrorRecord{Name: req.Name, Source: sourceFromAPI(req.Source), SourceClusterID: req.SourceClusterID, Sync: sync, DestinationTopics: dt}
	if _, err := e.CreateClusterMirror(ctx, rec); err != nil {
		return err
	}
	d, err := e.DescribeClusterMirror(req.Name)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/mirrors/"+req.Name)
	writeJSON(w, http.StatusCreated, mirrorToAPI(d))
	return nil
}

// checkSource refuses a source whose addresses are malformed (checkBootstrap) and a source
// with secrets when the worker cannot encrypt them.
func (s *server) checkSource(src api.SourceConnection) error {
	if err := checkBootstrap(src); err != nil {
		return err
	}
	hasSecret := (src.SASL != nil && src.SASL.Password != "") || (src.TLS != nil && src.TLS.ClientKeyPEM != "")
	if hasSecret && !s.canSeal {
		return badRequest(api.CodeInvalidClusterMirrorConfig,
			"the source has a secret (SASL password or TLS client key), and this worker has no secret key to encrypt it with: set %s on the worker", mirrorstate.SecretKeyEnv)
	}
	return nil
}

// checkBootstrap refuses malformed source addresses before the engine would try them and
// answer SOURCE_CLUSTER_UNREACHABLE.
func checkBootstrap(src api.SourceConnection) error {
	if len(src.BootstrapServers) == 0 {
		// In a PATCH an empty list would otherwise read as "no source change".
		return badRequest(api.CodeInvalidClusterMirrorConfig, "source.bootstrap_servers: at least one host:port is required")
	}
	for i, hp := range src.BootstrapServers {
		if err := api.CheckBrokerAddress(hp); err != nil {
			return badRequest(api.CodeInvalidClusterMirrorConfig, "source.bootstrap_servers[%d]: %v", i, err)
		}
	}
	return nil
}

func (s *server) listMirrors(w http.ResponseWriter, _ *http.Request, e engineAPI) error {
	out := api.MirrorList{Mirrors: []api.Mirror{}}
	for _, d := range e.ListClusterMirrors() {
		out.Mirrors = append(out.Mirrors, mirrorToAPI(d))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// mirrorParam is the {mirror} path value, validated so that a malformed name gets
// INVALID_CLUSTER_MIRROR_NAME rather than UNKNOWN_CLUSTER_MIRROR.
func mirrorParam(r *http.Request) (string, error) {
	name := r.PathValue("mirror")
	if err := partitionstate.ValidateMirrorName(name); err != nil {
		return "", badRequest(api.CodeInvalidClusterMirrorName, "%v", err)
	}
	return name, nil
}

func (s *server) getMirror(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	name, err := mirrorParam(r)
	if err != nil {
		return err
	}
	return writeMirror(w, e, name)
}

// writeMirror answers with the mirror as the engine describes it now.
func writeMirror(w http.ResponseWriter, e engineAPI, name string) error {
	d, err := e.DescribeClusterMirror(name)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, mirrorToAPI(d))
	return nil
}

func (s *server) updateMirror(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	name, err := mirrorParam(r)
	if err != nil {
		return err
	}
	var req api.UpdateMirrorRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	current, err := e.DescribeClusterMirror(name)
	if err != nil {
		return err
	}
	// Without a source only the sync settings change: the engine keeps the stored
	// connection, secrets included. A source replaces the whole connection.
	var source mirrorstate.SourceConnection
	if req.Source != nil {
		if err := s.checkSource(*req.Source); err != nil {
			return err
		}
		source = sourceFromAPI(*req.Source)
	}
	sync := current.Sync
	if req.Sync != nil {
		if sync, err = syncFromAPI(req.Sync); err != nil {
			return err
		}
	}
	dt := current.DestinationTopics
	if req.DestinationTopics != nil {
		if dt, err = destinationTopicsFromAPI(req.DestinationTopics); err != nil {
			return err
		}
	}
	ctx, cancel := commandContext(r)
	defer cancel()
	if _, err := e.UpdateClusterMirror(ctx, mirrorstate.MirrorRecord{Name: name, Source: source, Sync: sync, DestinationTopics: dt}); err != nil {
		return err
	}
	return writeMirror(w, e, name)
}

func (s *server) deleteMirror(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	name, err := mirrorParam(r)
	if err != nil {
		return err
	}
	ctx, cancel := commandContext(r)
	defer cancel()
	if err := e.DeleteClusterMirror(ctx, name); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *server) sourceTopics(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	name, err := mirrorParam(r)
	if err != nil {
		return err
	}
	topics, err := e.SourceTopics(r.Context(), name, r.URL.Query().Get("pattern"))
	return writeTopics(w, topics, err)
}

// writeTopics answers with a listing of source topics, or returns its error.
func writeTopics(w http.ResponseWriter, topics []string, err error) error {
	if err != nil {
		return err
	}
	if topics == nil {
		topics = []string{}
	}
	writeJSON(w, http.StatusOK, api.SourceTopics{Topics: topics})
	return nil
}

// listSourceTopics lists a source given by its connection; nothing is stored, so a secret
// needs no secret key.
func (s *server) listSourceTopics(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	var req api.SourceTopicsRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := checkBootstrap(req.Source); err != nil {
		return err
	}
	topics, err := e.ListSourceTopics(r.Context(), sourceFromAPI(req.Source), req.Pattern)
	return writeTopics(w, topics, err)
}

func (s *server) topicCommand(action string) v1Handler {
	return func(w http.ResponseWriter, r *http.Request, e engineAPI) error {
		name, err := mirrorParam(r)
		if err != nil {
			return err
		}
		var req api.TopicsRequest
		if err := decode(w, r, &req); err != nil {
			return err
		}
		if len(req.Topics) == 0 {
			return badRequest(api.CodeInvalidRequest, "topics: at least one topic is required")
		}
		if req.Divergence != "" && action != api.ActionStart {
			return badRequest(api.CodeInvalidRequest, "divergence is a setting of start only, not of %s", action)
		}
		if (req.Mode != "" || req.PromoteTimeout != "") && action != api.ActionStop {
			return badRequest(api.CodeInvalidRequest, "mode and promote_timeout are settings of stop only, not of %s", action)
		}
		promoteTimeout, err := stopSettings(req)
		if err != nil {
			return err
		}
		if req.Release && action != api.ActionStop {
			return badRequest(api.CodeInvalidRequest, "release is a setting of stop only, not of %s", action)
		}
		ctx, cancel := commandContext(r)
		defer cancel()
		s.ownerMu.Lock()
		defer s.ownerMu.Unlock()
		// Topics another owner manages get their refusal; the rest go to the engine.
		out := make([]api.TopicResult, len(req.Topics))
		var todo []string
		for i, topic := range req.Topics {
			out[i].Topic = topic
			if owner, _ := e.TopicOwner(topic); (req.Owner != "" || req.Release) && owner != "" && owner != req.Owner {
				out[i].ErrorCode, out[i].Message = api.CodeMirrorTopicOwnerMismatch, ownerMismatch(topic, owner, req.Owner)
				continue
			}
			todo = append(todo, topic)
		}
		results := []mirrorengine.TopicResult{}
		if len(todo) > 0 {
			switch action {
			case api.ActionStart:
				results, err = e.StartMirrorTopics(ctx, name, todo, req.Divergence)
			case api.ActionStop:
				if req.Mode == api.StopPromote {
					results, err = e.PromoteMirrorTopics(ctx, name, todo, promoteTimeout)
				} else {
					results, err = e.StopMirrorTopics(ctx, name, todo)
				}
			case api.ActionPause:
				results, err = e.PauseMirrorTopics(ctx, name, todo)
			case api.ActionResume:
				results, err = e.ResumeMirrorTopics(ctx, name, todo)
			}
			if err != nil {
				return err
			}
		}
		done := resultsToAPI(results).Results
		for i := range out {
			if out[i].ErrorCode != "" {
				continue
			}
			out[i], done = done[0], done[1:]
			if err := s.recordOwner(ctx, e, req, out[i]); err != nil {
				out[i].ErrorCode, out[i].Message = api.CodeUnknownServerError, err.Error()
			}
		}
		writeJSON(w, http.StatusOK, api.TopicResults{Results: out})
		return nil
	}
}

// recordOwner applies a command's ownership to a topic it succeeded on: a release (which an
// already stopped topic allows too) clears the owner, any other command that names one
// records it (it was the topic's owner already, or the topic had none).
func (s *server) recordOwner(ctx context.Context, e engineAPI, req api.TopicsRequest, res api.TopicResult) error {
	switch {
	case req.Release && (res.ErrorCode == "" || res.ErrorCode == api.CodeMirrorTopicAlreadyStopped):
		return e.SetTopicOwner(ctx, res.Topic, "")
	case req.Owner != "" && res.ErrorCode == "":
		return e.SetTopicOwner(ctx, res.Topic, req.Owner)
	}
	return nil
}

// ownerMismatch says who manages a topic, for a command from someone else.
func ownerMismatch(topic, owner, requester string) string {
	who := "a request without an owner id"
	if requester != "" {
		who = fmt.Sprintf("owner %s", requester)
	}
	return fmt.Sprintf("topic %q is managed by owner %s, so %s may not change it; in Terraform this is another "+
		"kafkamirror_mirror_topic (a renamed resource or for_each key needs a moved block)", topic, owner, who)
}

func (s *server) getTopic(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	name, err := mirrorParam(r)
	if err != nil {
		return err
	}
	var owners func() map[membership.Unit]string
	if s.group != nil {
		owners = s.group.owners(r.Context())
	}
	d, err := e.DescribeMirrorTopic(r.Context(), name, r.PathValue("topic"))
	if err != nil {
		return err
	}
	t := topicToAPI(d)
	t.Owner, _ = e.TopicOwner(d.Topic)
	if owners != nil {
		setWorkers(&t, owners())
	}
	writeJSON(w, http.StatusOK, t)
	return nil
}

func (s *server) badStateRecords(w http.ResponseWriter, _ *http.Request, e engineAPI) error {
	out := api.StateRecords{Records: []api.StateRecord{}}
	for _, r := range e.BadStateRecords() {
		out.Records = append(out.Records, stateRecordToAPI(r, false))
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (s *server) getStateRecord(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	rec, err := e.StateRecord(r.PathValue("key"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, stateRecordToAPI(rec, true))
	return nil
}

func (s *server) removeStateRecord(w http.ResponseWriter, r *http.Request, e engineAPI) error {
	var force bool
	switch v := r.URL.Query().Get("force"); v {
	case "", "false":
	case "true":
		force = true
	default:
		return badRequest(api.CodeInvalidRequest, "force=%q: want true or false", v)
	}
	ctx, cancel := commandContext(r)
	defer cancel()
	if err := e.RemoveStateRecord(ctx, r.PathValue("key"), force); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// decode reads a JSON body strictly: a JSON content type, at most maxBody bytes, no unknown
// fields, exactly one value. Strictness turns a misspelt field into an error instead of a
// silently ignored setting.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	// A body declared as something else (curl -d sends a form) is refused with 415 rather
	// than parsed as JSON by luck. No Content-Type at all claims nothing and is parsed.
	if ct := r.Header.Get("Content-Type"); ct != "" {
		if mt, _, err := mime.ParseMediaType(ct); err != nil || mt != "application/json" {
			return &api.Error{Status: http.StatusUnsupportedMediaType, Code: api.CodeInvalidRequest,
				Message: fmt.Sprintf("Content-Type %q is not supported: send the body as application/json", ct)}
		}
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxBody)
	dec := json.NewDecoder(r.Body)
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return badRequest(api.CodeInvalidRequest, "malformed JSON: the body must hold exactly one JSON object")
		}
		return nil
	}
	var tooBig *http.MaxBytesError
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &tooBig):
		return &api.Error{Status: http.StatusRequestEntityTooLarge, Code: api.CodeInvalidRequest, Message: fmt.Sprintf("the request body is larger than %d bytes", maxBody)}
	case errors.Is(err, io.EOF):
		return badRequest(api.CodeInvalidRequest, "the request body is empty; a JSON object is required")
	case errors.As(err, &syntax), errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest(api.CodeInvalidRequest, "malformed JSON: %v", err)
	case errors.As(err, &typ):
		// The message names the field and the expected type, never the value.
		return badRequest(api.CodeInvalidRequest, "field %q must be a JSON %s, not %s", typ.Field, typ.Type, typ.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return badRequest(api.CodeInvalidRequest, "unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
	}
	return badRequest(api.CodeInvalidRequest, "invalid request body: %v", err)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // an API, not a web page: keep "<" readable in messages
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, e *api.Error) {
	writeJSON(w, e.Status, api.ErrorBody{ErrorCode: e.Code, Message: e.Message})
}

// statusRecorder remembers the status for the access log.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

// WriteHeader records the status.
func (s *statusRecorder) WriteHeader(code int) {
	s.status = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the real writer.
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// stopSettings checks a stop's mode and promote timeout; the timeout is 0 (the engine's
// default) when not given.
func stopSettings(req api.TopicsRequest) (time.Duration, error) {
	switch req.Mode {
	case "", api.StopFailover, api.StopPromote:
	default:
		return 0, badRequest(api.CodeInvalidRequest, "mode %q: want %q or %q", req.Mode, api.StopFailover, api.StopPromote)
	}
	if req.PromoteTimeout == "" {
		return 0, nil
	}
	if req.Mode != api.StopPromote {
		return 0, badRequest(api.CodeInvalidRequest, "promote_timeout is a setting of mode %q only", api.StopPromote)
	}
	d, err := api.PromoteTimeoutRange.Parse(req.PromoteTimeout)
	if err != nil {
		return 0, badRequest(api.CodeInvalidRequest, "promote_timeout: %v", err)
	}
	return d, nil
}
