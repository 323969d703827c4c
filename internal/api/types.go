// Package api is the worker's HTTP API v1: the request and response types, the error codes
// and the client. It is the whole contract between the worker and the Terraform provider:
// the provider imports this package and never the engine, so everything a client may rely
// on is spelled out here (JSON names in snake_case, as in docs/design.md's route table).
//
// Routes (every /v1 route needs "Authorization: Bearer <token>"):
//
//	POST   /v1/mirrors                              CreateMirrorRequest → Mirror (201)
//	GET    /v1/mirrors                              → MirrorList
//	GET    /v1/mirrors/{mirror}                     → Mirror
//	PATCH  /v1/mirrors/{mirror}                     UpdateMirrorRequest → Mirror
//	DELETE /v1/mirrors/{mirror}                     → 204
//	GET    /v1/mirrors/{mirror}/source-topics       ?pattern=REGEX → SourceTopics
//	POST   /v1/source-topics                        SourceTopicsRequest → SourceTopics
//	POST   /v1/mirrors/{mirror}/topics/start        TopicsRequest (with divergence) → TopicResults
//	POST   /v1/mirrors/{mirror}/topics/stop         TopicsRequest → TopicResults
//	POST   /v1/mirrors/{mirror}/topics/pause        TopicsRequest → TopicResults
//	POST   /v1/mirrors/{mirror}/topics/resume       TopicsRequest → TopicResults
//	GET    /v1/mirrors/{mirror}/topics/{topic}      → Topic
//	GET    /v1/state/bad-records                    → StateRecords
//	GET    /v1/state/records/{key...}               → StateRecord
//	DELETE /v1/state/records/{key...}               ?force=true → 204
//	GET    /v1/group                                → Group
//	GET    /metrics, /healthz, /readyz              no token
//
// A failed request has a non-2xx status and an ErrorBody; the client returns it as *Error.
// The reads answer within a few seconds whatever the clusters do: a describe of topics waits
// at most 3 s for each cluster (Partition.Unreachable), the other reads ask no cluster.
package api

import (
	"encoding/json"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kip"
)

// CreateMirrorRequest is the body of POST /v1/mirrors (the KIP's CreateClusterMirror).
type CreateMirrorRequest struct {
	// Name is the mirror's name: Kafka topic-name rules, not ending in ".paused" or ".removed".
	Name string `json:"name"`
	// Source is how the worker connects to the source cluster.
	Source SourceConnection `json:"source"`
	// SourceClusterID, when set, is the cluster id the source must have; the create fails
	// with SOURCE_CLUSTER_ID_MISMATCH otherwise. Empty: the mirror binds to whatever id the
	// source has now.
	SourceClusterID string `json:"source_cluster_id,omitempty"`
	// Sync holds the metadata sync settings; nil means DefaultSync.
	Sync *SyncSettings `json:"sync,omitempty"`
	// DestinationTopics is how the worker creates the mirror's destination topics; nil
	// means the defaults (see DestinationTopics).
	DestinationTopics *DestinationTopics `json:"destination_topics,omitempty"`
}

// DestinationTopics are a mirror's settings for the destination topics the worker creates
// (when a topic starts and the destination has no such topic; an existing topic is left as
// it is). A zero field means its default:
//   - ReplicationFactor: the source topic's replication factor;
//   - MinInsyncReplicas: the source topic's min.insync.replicas override, else 2 when the
//     topic has 3 or more replicas, else the destination broker's default.
//
// Both are capped by the destination's broker count (the worker logs a warning then).
type DestinationTopics struct {
	ReplicationFactor int `json:"replication_factor,omitempty"`
	MinInsyncReplicas int `json:"min_insync_replicas,omitempty"`
}

// UpdateMirrorRequest is the body of PATCH /v1/mirrors/{mirror}: new credentials or new sync
// settings. A nil field keeps the current value. A given Source replaces the whole source
// connection, secrets included: secrets are write-only, so a client that changes any source
// setting sends the secrets again.
type UpdateMirrorRequest struct {
	Source *SourceConnection `json:"source,omitempty"`
	Sync   *SyncSettings     `json:"sync,omitempty"`
	// DestinationTopics, when given, replaces both settings ({} returns both to their
	// defaults). They apply to destination topics created from then on.
	DestinationTopics *DestinationTopics `json:"destination_topics,omitempty"`
}

// SourceConnection is the connection to a source cluster. In requests it carries secrets
// (SASL.Password, TLS.ClientKeyPEM); in responses the worker never fills them, and TLS is an
// empty object when TLS is on (the worker does not echo PEM data).
type SourceConnection struct {
	// BootstrapServers are the source's host:port seeds (CheckBrokerAddress).
	BootstrapServers []string `json:"bootstrap_servers"`
	// TLS is nil for plaintext.
	TLS *TLS `json:"tls,omitempty"`
	// SASL is nil for no SASL.
	SASL *SASL `json:"sasl,omitempty"`
}

// TLS configures TLS to a source cluster. PEM data is given inline because the worker may
// run on another machine than the client.
type TLS struct {
	CACertPEM     string `json:"ca_cert_pem,omitempty"`
	ClientCertPEM string `json:"client_cert_pem,omitempty"`
	// ClientKeyPEM is write-only: stored encrypted, never returned.
	ClientKeyPEM       string `json:"client_key_pem,omitempty"`
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
}

// SASL configures SASL to a source cluster.
type SASL struct {
	// Mechanism is PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512.
	Mechanism string `json:"mechanism"`
	Username  string `json:"username"`
	// Password is write-only: stored encrypted, never returned.
	Password string `json:"password,omitempty"`
}

// SyncSettings are a mirror's metadata sync settings (the KIP's MirrorMetadataManager).
// When a request gives them, every field is taken as given; only an empty Interval falls
// back to DefaultSyncInterval.
type SyncSettings struct {
	// Interval is a Go duration ("30s", "1m") within SyncIntervalRange.
	Interval            string   `json:"interval,omitempty"`
	TopicConfigs        bool     `json:"topic_configs"`
	TopicConfigExcludes []string `json:"topic_config_excludes,omitempty"`
	ConsumerGroups      bool     `json:"consumer_groups"`
	GroupIncludes       []string `json:"group_includes,omitempty"`
	GroupExcludes       []string `json:"group_excludes,omitempty"`
	ACLs                bool     `json:"acls"`
}

// DefaultSyncInterval is the KIP's mirror.metadata.refresh.interval.ms default.
const DefaultSyncInterval = kip.DefaultSyncInterval

// DefaultSync is what a mirror created without sync settings gets: everything synced,
// every DefaultSyncInterval.
func DefaultSync() SyncSettings {
	return SyncSettings{Interval: DefaultSyncInterval.String(), TopicConfigs: true, ConsumerGroups: true, ACLs: true}
}

// Mirror describes a cluster mirror (the KIP's DescribeClusterMirrors). It never holds a
// secret.
type Mirror struct {
	Name            string           `json:"name"`
	Source          SourceConnection `json:"source"`
	SourceClusterID string           `json:"source_cluster_id"`
	Sync            SyncSettings     `json:"sync"`
	// DestinationTopics are the settings given (zero fields: the defaults).
	DestinationTopics DestinationTopics `json:"destination_topics"`
	CreatedAt         time.Time         `json:"created_at"`
	// Topics are the topics whose mirror.name names this mirror, in any state, sorted.
	Topics     []string `json:"topics"`
	TopicCount int      `json:"topic_count"`
	// SyncErrors holds, by the KIP's gauge name (TopicConfigSyncError,
	// ConsumerGroupOffsetSyncError, AclSyncError, TopicMetadataRefreshError), the errors of
	// the last metadata sync cycle; empty when it succeeded.
	SyncErrors map[string]string `json:"sync_errors"`
	// SyncSkippedActiveGroups counts consumer groups whose offsets the last cycle left alone
	// because they have members on the destination.
	SyncSkippedActiveGroups int `json:"sync_skipped_active_groups"`
	// Error is why the mirror cannot be used: its __mirror_state record cannot be read (see
	// StateRecord). Its topics do not run and commands on it answer
	// MIRROR_STATE_RECORD_UNREADABLE; only Name and Topics are filled.
	Error string `json:"error,omitempty"`
}

// MirrorList is the body of GET /v1/mirrors (the KIP's ListClusterMirrors), sorted by name.
type MirrorList struct {
	Mirrors []Mirror `json:"mirrors"`
}

// SourceTopics is the answer of the source-topics routes: the source's topic names matching
// the pattern, internal topics excluded, sorted. Every listing asks one broker (the
// lowest-numbered), so a topic deleted on the source does not come back in a later one.
type SourceTopics struct {
	Topics []string `json:"topics"`
}

// SourceTopicsRequest is the body of POST /v1/source-topics: list the topics of a source
// no mirror has yet (a plan that creates the mirror). The connection, secrets included, is
// used for this listing only and never stored. Pattern is a regular expression; empty
// lists every topic.
type SourceTopicsRequest struct {
	Source  SourceConnection `json:"source"`
	Pattern string           `json:"pattern,omitempty"`
}

// The divergence policies of a start (docs/design.md "Divergence policy").
const (
	// DivergenceFail refuses to start when the destination has records the source lacks.
	DivergenceFail = "fail"
	// DivergenceRecreate deletes and recreates such a destination topic.
	DivergenceRecreate = "recreate"
)

// TopicsRequest is the body of the topic commands. Divergence is accepted by start only
// (empty means DivergenceFail).
//
// Owner and Release make ownership explicit: a client object that manages topics (a
// Terraform kafkamirror_mirror_topic) sends its owner id with every command. A command
// that names an owner, or releases, fails for a topic recorded with another owner
// (MIRROR_TOPIC_OWNER_MISMATCH, before anything happens to it); once it succeeds, the
// owner it names is recorded (a start, or the first command for a topic without one).
// Release (stop only) clears the recorded owner once the topic is stopped (or was already):
// the client no longer manages it. Commands without either (an operator's) neither check
// nor change it.
type TopicsRequest struct {
	Topics     []string `json:"topics"`
	Divergence string   `json:"divergence,omitempty"`
	// Mode is how stop stops: StopFailover (default: at once) or StopPromote (wait for lag 0
	// and a final group offset sync first; nothing stops when that cannot finish).
	Mode string `json:"mode,omitempty"`
	// PromoteTimeout bounds a promote's wait for lag 0, a Go duration from 1s to 4m
	// (default 1m).
	PromoteTimeout string `json:"promote_timeout,omitempty"`
	Owner          string `json:"owner,omitempty"`
	Release        bool   `json:"release,omitempty"`
}

// TopicResults is a topic command's answer: one result per requested topic, in request
// order. The request itself succeeded (200) even when some topics failed.
type TopicResults struct {
	Results []TopicResult `json:"results"`
}

// TopicResult is one topic's outcome; ErrorCode is empty on success.
type TopicResult struct {
	Topic     string `json:"topic"`
	ErrorCode string `json:"error_code,omitempty"`
	Message   string `json:"message,omitempty"`
	// FinalSync is a stop's consumer group offset sync after the last mirrored record:
	// "synced", or why it did not happen.
	FinalSync string `json:"final_sync,omitempty"`
}

// The ways to stop a mirrored topic (TopicsRequest.Mode).
const (
	StopFailover = "failover"
	StopPromote  = "promote"
)

// Err returns the result's failure as an *Error (with Status 0: the request succeeded), or
// nil.
func (r TopicResult) Err() error {
	if r.ErrorCode == "" {
		return nil
	}
	return &Error{Code: r.ErrorCode, Message: r.Message}
}

// The desired states of a mirrored topic, from its mirror.name suffix.
const (
	DesiredMirroring = kip.DesiredMirroring
	DesiredPaused    = kip.DesiredPaused
	DesiredStopped   = kip.DesiredStopped
)

// The partition states, with the KIP's names.
const (
	StateUnknown   = kip.StateUnknown
	StatePreparing = kip.StatePreparing
	StateMirroring = kip.StateMirroring
	StatePausing   = kip.StatePausing
	StatePaused    = kip.StatePaused
	StateStopping  = kip.StateStopping
	StateStopped   = kip.StateStopped
	StateFailed    = kip.StateFailed
)

// States lists the partition states in the KIP's order.
var States = kip.States

// Topic describes a mirrored topic: GET /v1/mirrors/{mirror}/topics/{topic}.
type Topic struct {
	Mirror string `json:"mirror"`
	Topic  string `json:"topic"`
	// MirrorName is the KIP's mirror.name value, with its ".paused" or ".removed" suffix.
	MirrorName string `json:"mirror_name"`
	// DesiredState is DesiredMirroring, DesiredPaused or DesiredStopped.
	DesiredState string `json:"desired_state"`
	// Divergence is the divergence policy of the last start (DivergenceFail or
	// DivergenceRecreate).
	Divergence string `json:"divergence"`
	// Owner is the owner id recorded by the commands (TopicsRequest); empty when no owner
	// manages the topic.
	Owner string `json:"owner"`
	// ConfigsLeftOut are the source topic configs the destination topic was created
	// without, each with its reason: the KIP's exclude list, another distribution's config,
	// one removed in Kafka 4.0, the mirror's topic_config_excludes, or refused by the
	// destination.
	ConfigsLeftOut []string    `json:"configs_left_out,omitempty"`
	Partitions     []Partition `json:"partitions"`
}

// Partition is one partition's line of the KIP's describe table.
type Partition struct {
	Partition int32 `json:"partition"`
	// State is the KIP's state name (StateMirroring, ...).
	State string `json:"state"`
	// SourceOffset is the source high watermark and DestinationOffset the destination end
	// offset as last read, at SourceOffsetAt and DestinationOffsetAt: now when the cluster
	// answered this describe in time, earlier when it did not (then it is in Unreachable);
	// -1 (and no time) when never read.
	SourceOffset        int64     `json:"source_offset"`
	SourceOffsetAt      time.Time `json:"source_offset_at,omitzero"`
	DestinationOffset   int64     `json:"destination_offset"`
	DestinationOffsetAt time.Time `json:"destination_offset_at,omitzero"`
	// Unreachable names the clusters, "source" and "destination", that did not answer this
	// describe in time (the worker waits 3 s for each).
	Unreachable []string `json:"unreachable,omitempty"`
	// Lag is SourceOffset - DestinationOffset, 0 when either is unknown.
	Lag int64 `json:"lag"`
	// LastMirroredOffset and LastMirroredEpoch are recorded at stop; -1 before.
	LastMirroredOffset int64 `json:"last_mirrored_offset"`
	LastMirroredEpoch  int32 `json:"last_mirrored_epoch"`
	// Error is the failure of a FAILED partition, or why a MIRRORING one is stalled ("stalled:
	// source unreachable, mirroring sessions failing for 45s: ..."): its data path has not
	// reached a cluster for longer than the worker's stall threshold.
	Error string `json:"error"`
	// RetryAttempt counts automatic retries; -1 means the failure is not retryable and waits
	// for the operator.
	RetryAttempt int16 `json:"retry_attempt"`
	// Worker is the group.worker_id of the worker that runs the partition, as the answering
	// worker knows its group; empty while nobody runs it (a rebalance).
	Worker string `json:"worker,omitempty"`
}

// Health is the body of /healthz and /readyz.
type Health struct {
	Status  string `json:"status"` // "ok" or "unavailable"
	Message string `json:"message,omitempty"`
}

// StateRecord is a record of the worker's __mirror_state topic, for the operator's repair
// of one that cannot be read (the worker's `state` commands).
type StateRecord struct {
	Key string `json:"key"`
	// Kind is "mirror", "topicconfig", "partition" or "lastmirror"; Mirror, Topic and
	// Partition are the key's other parts ("" or -1 where the kind has none).
	Kind      string `json:"kind"`
	Mirror    string `json:"mirror,omitempty"`
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	// StatePartition and Offset locate the record in __mirror_state.
	StatePartition int32 `json:"state_partition"`
	Offset         int64 `json:"offset"`
	// Problem is why the value cannot be read; empty for a readable record.
	Problem string `json:"problem,omitempty"`
	// The stored value (GET /v1/state/records/{key} only): Value when it is JSON, with a
	// mirror's secret fields redacted, else ValueBase64.
	Value       json.RawMessage `json:"value,omitempty"`
	ValueBase64 string          `json:"value_base64,omitempty"`
}

// StateRecords is the body of GET /v1/state/bad-records: the records that cannot be read,
// sorted by key, without their values.
type StateRecords struct {
	Records []StateRecord `json:"records"`
}

// Group is the group of the workers that share a destination, as the answering worker
// learnt it from its last assignment (GET /v1/group).
type Group struct {
	Name       string        `json:"name"`
	Generation int32         `json:"generation"`
	Members    []GroupMember `json:"members"`
}

// GroupMember is one worker of the group and the work it owns.
type GroupMember struct {
	WorkerID string `json:"worker_id"`
	Version  string `json:"version"`
	APIURL   string `json:"api_url"`
	// Partitions counts the mirrored partitions it runs; MirrorSyncs names the mirrors whose
	// metadata sync it runs; Commands is whether it applies the commands.
	Partitions  int      `json:"partitions"`
	MirrorSyncs []string `json:"mirror_syncs"`
	Commands    bool     `json:"commands"`
}
