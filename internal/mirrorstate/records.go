package mirrorstate

// The record kinds of __mirror_state and their on-disk encoding.
//
// Keys are plain strings (docs/design.md "__mirror_state"):
//
//	mirror/<name>
//	topicconfig/<topic>
//	partition/<mirror>/<topic>/<partition>
//	lastmirror/<mirror>/<topic>/<partition>
//
// Values are JSON objects carrying a version field "v" (currently 1). A
// tombstone (null value) deletes the key. JSON rather than a binary encoding
// because the topic is small, written rarely and read once at start, and an
// operator can inspect it with any console consumer.
//
// Compatibility rules: fields may be added to a version-1 value (old readers
// ignore them); any change an old reader would misread (a renamed or retyped
// field, a new meaning) bumps "v", and readers refuse versions newer than
// they know instead of dropping the record, since a dropped mirror or
// partition state would be silently forgotten.

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkaconn"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/partitionstate"
)

// recordVersion is the value version this code writes and the newest it reads.
const recordVersion = 1

// MirrorRecord is a cluster mirror's definition: the `mirror/<name>` record.
type MirrorRecord struct {
	// Name is the mirror's name; it is the record's key, not stored in the value.
	Name string
	// Source is how to connect to the source cluster.
	Source SourceConnection
	// SourceClusterID is the source cluster id this mirror is bound to
	// (expected by the operator, or learned at create).
	SourceClusterID string
	// Sync holds the metadata sync settings.
	Sync SyncSettings
	// CreatedAt is when the mirror was created. The store keeps times in
	// UTC without a monotonic reading, as they come back from a reload.
	CreatedAt time.Time
	// DestinationTopics is how the worker creates the mirror's destination
	// topics; the zero value follows the source (see ReplicationFor).
	DestinationTopics DestinationTopicSettings
}

// DestinationTopicSettings are a mirror's settings for the destination topics
// the worker creates. A zero field means the default: ReplicationFactor the
// source topic's, capped by the destination's broker count; MinInsyncReplicas
// the source topic's override, else 2 from 3 replicas on, else the broker's
// default. Both are capped by the destination's broker count.
type DestinationTopicSettings struct {
	ReplicationFactor int16
	MinInsyncReplicas int
}

// SourceConnection is the connection to a mirror's source cluster. Its secrets
// (TLS ClientKeyPEM, SASL Password) are sealed in __mirror_state and printed as
// "[redacted]".
type SourceConnection = kafkaconn.Settings

// TLSSettings configures TLS to the source.
type TLSSettings = kafkaconn.TLS

// SASLSettings configures SASL to the source.
type SASLSettings = kafkaconn.SASL

// SyncSettings are a mirror's metadata sync settings (the KIP's
// MirrorMetadataManager). The store keeps and round-trips them.
type SyncSettings struct {
	Interval            time.Duration
	TopicConfigs        bool
	TopicConfigExcludes []string
	ConsumerGroups      bool
	GroupIncludes       []string
	GroupExcludes       []string
	ACLs                bool
}

// TopicConfigRecord is the KIP's per-topic mirror config, the
// `topicconfig/<topic>` record. It lives in the store because vanilla brokers
// reject unknown topic configs such as mirror.name.
type TopicConfigRecord struct {
	// MirrorName is the mirror.name value: "<mirror>", "<mirror>.paused"
	// or "<mirror>.removed" (see ParseMirrorName).
	MirrorName string
	// Divergence is "fail" or "recreate".
	Divergence string
	// SourceTopicID is the hex source topic id seen at first start, ""
	// when unknown. A change means the source topic was recreated.
	SourceTopicID string
	// Owner is the id of the client object that manages the topic (a
	// Terraform kafkamirror_mirror_topic), "" when none claimed it.
	Owner string
	// ConfigsLeftOut are the source topic configs the destination topic was created
	// without, each with its reason ("confluent.x (another distribution's config)").
	ConfigsLeftOut []string
}

// PartitionRecord is a mirrored partition's state, the
// `partition/<mirror>/<topic>/<partition>` record.
type PartitionRecord struct {
	// Status is the state machine's status; states are stored by name.
	Status partitionstate.Status
	// UpdatedAt is when the status was written (UTC, no monotonic reading).
	UpdatedAt time.Time
}

// LastMirrorRecord is written at STOPPING, the
// `lastmirror/<mirror>/<topic>/<partition>` record. The OTHER cluster's
// engine reads it at failback to find where mirroring stopped.
type LastMirrorRecord struct {
	// LastMirroredOffset (LMO) is the destination end offset at stop.
	LastMirroredOffset int64
	// LastMirroredEpoch (LME) is the last mirrored source leader epoch, -1
	// when unknown.
	LastMirroredEpoch int32
	// SourceClusterID is the id of the cluster the topic was mirrored from.
	SourceClusterID string
	// SourceTopicID is the hex id of the source topic.
	SourceTopicID string
	// DestinationClusterID is the id of the cluster holding this record.
	DestinationClusterID string
}

// RecordVersionError is a load error: a __mirror_state value has a version
// newer than this code knows. The record is never dropped silently: the
// worker must be upgraded before it can trust its view.
type RecordVersionError struct {
	Key     string
	Version int
	Known   int
}

func (e *RecordVersionError) Error() string {
	return fmt.Sprintf("__mirror_state record %q has value version %d; this kafkamirror reads versions up to %d: upgrade the worker",
		e.Key, e.Version, e.Known)
}

// ---- keys ----

// recordKind is the kind of a __mirror_state record, from its key.
type Kind int8

const (
	KindMirror Kind = iota + 1
	KindTopicConfig
	KindPartition
	KindLastMirror
)

// The key prefixes, which are the kinds' on-disk names.
const (
	prefixMirror      = "mirror/"
	prefixTopicConfig = "topicconfig/"
	prefixPartition   = "partition/"
	prefixLastMirror  = "lastmirror/"
)

// recordKey is a parsed key. mirror is set for mirror, partition and
// lastmirror keys; topic for topicconfig, partition and lastmirror keys;
// partition for partition and lastmirror keys.
type RecordKey struct {
	Kind      Kind
	Mirror    string
	Topic     string
	Partition int32
}

// String formats the key as stored. Components must be valid (see checkComponent).
func (k RecordKey) String() string {
	switch k.Kind {
	case KindMirror:
		return prefixMirror + k.Mirror
	case KindTopicConfig:
		return prefixTopicConfig + k.Topic
	case KindPartition:
		return prefixPartition + k.Mirror + "/" + k.Topic + "/" + strconv.Itoa(int(k.Partition))
	case KindLastMirror:
		return prefixLastMirror + k.Mirror + "/" + k.Topic + "/" + strconv.Itoa(int(k.Partition))
	}
	return fmt.Sprintf("recordKey(kind %d)", k.Kind)
}

// checkComponent rejects a key component that would make the key ambiguous.
// Mirror and topic names cannot contain '/' under Kafka's naming rules, but
// the store does not trust its callers to have validated them.
func checkComponent(what, s string) error {
	if s == "" {
		return fmt.Errorf("%s must not be empty", what)
	}
	if strings.Contains(s, "/") {
		return fmt.Errorf("%s %q contains '/', which __mirror_state keys use as a separator", what, s)
	}
	return nil
}

func (k RecordKey) validate() error {
	switch k.Kind {
	case KindMirror:
		return checkComponent("mirror name", k.Mirror)
	case KindTopicConfig:
		return checkComponent("topic name", k.Topic)
	case KindPartition, KindLastMirror:
		if err := checkComponent("mirror name", k.Mirror); err != nil {
			return err
		}
		if err := checkComponent("topic name", k.Topic); err != nil {
			return err
		}
		if k.Partition < 0 {
			return fmt.Errorf("partition %d is negative", k.Partition)
		}
		return nil
	}
	return fmt.Errorf("unknown record kind %d", k.Kind)
}

// parseKey parses a stored key. It is strict (exact component count,
// canonical partition number) because two spellings of one partition would
// be two keys that compaction keeps apart; the loader skips keys it rejects.
func ParseKey(s string) (RecordKey, error) {
	var k RecordKey
	var rest string
	var parts int
	switch {
	case strings.HasPrefix(s, prefixMirror):
		k.Kind, rest, parts = KindMirror, s[len(prefixMirror):], 1
	case strings.HasPrefix(s, prefixTopicConfig):
		k.Kind, rest, parts = KindTopicConfig, s[len(prefixTopicConfig):], 1
	case strings.HasPrefix(s, prefixPartition):
		k.Kind, rest, parts = KindPartition, s[len(prefixPartition):], 3
	case strings.HasPrefix(s, prefixLastMirror):
		k.Kind, rest, parts = KindLastMirror, s[len(prefixLastMirror):], 3
	default:
		return RecordKey{}, errors.New("unknown key kind")
	}
	fields := strings.Split(rest, "/")
	if len(fields) != parts {
		return RecordKey{}, fmt.Errorf("want %d '/'-separated fields after the kind, got %d", parts, len(fields))
	}
	switch k.Kind {
	case KindMirror:
		k.Mirror = fields[0]
	case KindTopicConfig:
		k.Topic = fields[0]
	default:
		k.Mirror, k.Topic = fields[0], fields[1]
		p, err := strconv.ParseInt(fields[2], 10, 32)
		if err != nil || strconv.FormatInt(p, 10) != fields[2] {
			return RecordKey{}, fmt.Errorf("partition %q is not a canonical decimal int32", fields[2])
		}
		k.Partition = int32(p)
	}
	if err := k.validate(); err != nil {
		return RecordKey{}, err
	}
	return k, nil
}

// ---- values: the version-1 wire shapes ----

type mirrorValueV1 struct {
	V               int          `json:"v"`
	Source          sourceWireV1 `json:"source"`
	SourceClusterID string       `json:"source_cluster_id,omitempty"`
	Sync            syncWireV1   `json:"sync"`
	CreatedAt       time.Time    `json:"created_at,omitzero"`
	// DestinationTopics was added to version 1 (older readers ignore it, and
	// a record without it decodes to the defaults); absent when both are 0.
	DestinationTopics *destinationTopicsWireV1 `json:"destination_topics,omitempty"`
}

type destinationTopicsWireV1 struct {
	ReplicationFactor int16 `json:"replication_factor,omitempty"`
	MinInsyncReplicas int   `json:"min_insync_replicas,omitempty"`
}

// Slices use omitzero rather than omitempty so that nil and empty lists stay
// distinct across a reload (absent → nil, [] → empty).
type sourceWireV1 struct {
	BootstrapServers []string    `json:"bootstrap_servers,omitzero"`
	TLS              *tlsWireV1  `json:"tls,omitempty"`
	SASL             *saslWireV1 `json:"sasl,omitempty"`
}

type tlsWireV1 struct {
	CACertPEM          string `json:"ca_cert_pem,omitempty"`
	ClientCertPEM      string `json:"client_cert_pem,omitempty"`
	ClientKeyPEM       string `json:"client_key_pem,omitempty"` // sealed
	InsecureSkipVerify bool   `json:"insecure_skip_verify,omitempty"`
	ServerName         string `json:"server_name,omitempty"`
}

type saslWireV1 struct {
	Mechanism string `json:"mechanism,omitempty"`
	Username  string `json:"username,omitempty"`
	Password  string `json:"password,omitempty"` // sealed
}

type syncWireV1 struct {
	// Interval is a Go duration string ("1m30s"): exact, unlike a float
	// of seconds, and readable, unlike nanoseconds.
	Interval            string   `json:"interval,omitempty"`
	TopicConfigs        bool     `json:"topic_configs"`
	TopicConfigExcludes []string `json:"topic_config_excludes,omitzero"`
	ConsumerGroups      bool     `json:"consumer_groups"`
	GroupIncludes       []string `json:"group_includes,omitzero"`
	GroupExcludes       []string `json:"group_excludes,omitzero"`
	ACLs                bool     `json:"acls"`
}

// topicConfigValueV1 keeps the KIP's config name "mirror.name" as its field
// name (docs/design.md), so the record reads like the topic config it stands for.
type topicConfigValueV1 struct {
	V             int      `json:"v"`
	MirrorName    string   `json:"mirror.name"`
	Divergence    string   `json:"divergence,omitempty"`
	SourceTopicID string   `json:"source_topic_id,omitempty"`
	Owner         string   `json:"owner,omitempty"`
	LeftOut       []string `json:"configs_left_out,omitempty"`
}

type partitionValueV1 struct {
	V            int       `json:"v"`
	State        string    `json:"state"`
	Previous     string    `json:"previous"`
	StateEpoch   int32     `json:"state_epoch"`
	Error        string    `json:"error,omitempty"`
	RetryAttempt int16     `json:"retry_attempt"`
	RetryAt      time.Time `json:"retry_at,omitzero"`
	UpdatedAt    time.Time `json:"updated_at,omitzero"`
}

// lastMirrorValueV1 writes every field, empty or not: another cluster's
// engine reads it, and an explicit "" is clearer than an absent field there.
type lastMirrorValueV1 struct {
	V                    int    `json:"v"`
	LastMirroredOffset   int64  `json:"last_mirrored_offset"`
	LastMirroredEpoch    int32  `json:"last_mirrored_epoch"`
	SourceClusterID      string `json:"source_cluster_id"`
	SourceTopicID        string `json:"source_topic_id"`
	DestinationClusterID string `json:"destination_cluster_id"`
}

// ---- encoding ----

// storeTime drops the location and monotonic reading, which JSON does not keep.
func storeTime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC()
}

// encodeMirror encodes m, sealing its secrets with s. A non-empty secret
// with a nil s is an error naming the secret key setting: storing it in
// clear is never an option.
func encodeMirror(m MirrorRecord, s *Sealer) ([]byte, error) {
	seal := func(field, plain string) (string, error) {
		if plain == "" {
			return "", nil
		}
		if s == nil {
			return "", fmt.Errorf("mirror %q has a %s, which is stored only encrypted: %w", m.Name, field, ErrNoSecretKey)
		}
		sealed, err := s.Seal(plain)
		if err != nil {
			return "", fmt.Errorf("mirror %q: %s: %w", m.Name, field, err)
		}
		return sealed, nil
	}
	v := mirrorValueV1{
		V: recordVersion,
		Source: sourceWireV1{
			BootstrapServers: m.Source.BootstrapServers,
		},
		SourceClusterID: m.SourceClusterID,
		Sync: syncWireV1{
			TopicConfigs:        m.Sync.TopicConfigs,
			TopicConfigExcludes: m.Sync.TopicConfigExcludes,
			ConsumerGroups:      m.Sync.ConsumerGroups,
			GroupIncludes:       m.Sync.GroupIncludes,
			GroupExcludes:       m.Sync.GroupExcludes,
			ACLs:                m.Sync.ACLs,
		},
		CreatedAt: storeTime(m.CreatedAt),
	}
	if d := m.DestinationTopics; d != (DestinationTopicSettings{}) {
		v.DestinationTopics = &destinationTopicsWireV1{ReplicationFactor: d.ReplicationFactor, MinInsyncReplicas: d.MinInsyncReplicas}
	}
	if m.Sync.Interval != 0 {
		v.Sync.Interval = m.Sync.Interval.String()
	}
	t, a, err := withSecrets(m.Source.TLS, m.Source.SASL, seal)
	if err != nil {
		return nil, err
	}
	v.Source.TLS, v.Source.SASL = (*tlsWireV1)(t), (*saslWireV1)(a)
	return marshalValue(v)
}

func encodeTopicConfig(r TopicConfigRecord) ([]byte, error) {
	if r.MirrorName == "" {
		return nil, errors.New("topic config has an empty mirror.name; delete the record instead")
	}
	return marshalValue(topicConfigValueV1{
		V:             recordVersion,
		MirrorName:    r.MirrorName,
		Divergence:    r.Divergence,
		SourceTopicID: r.SourceTopicID,
		Owner:         r.Owner,
		LeftOut:       r.ConfigsLeftOut,
	})
}

func encodePartition(r PartitionRecord) ([]byte, error) {
	// String() of an undefined state is "State(n)", which ParseState would
	// reject at the next load: refuse it now instead of poisoning the store.
	if !r.Status.State.Valid() || !r.Status.Previous.Valid() {
		return nil, fmt.Errorf("partition status has an undefined state (%v, previous %v)", r.Status.State, r.Status.Previous)
	}
	return marshalValue(partitionValueV1{
		V:            recordVersion,
		State:        r.Status.State.String(),
		Previous:     r.Status.Previous.String(),
		StateEpoch:   r.Status.StateEpoch,
		Error:        r.Status.Error,
		RetryAttempt: r.Status.RetryAttempt,
		RetryAt:      storeTime(r.Status.RetryAt),
		UpdatedAt:    storeTime(r.UpdatedAt),
	})
}

func encodeLastMirror(r LastMirrorRecord) ([]byte, error) {
	return marshalValue(lastMirrorValueV1{
		V:                    recordVersion,
		LastMirroredOffset:   r.LastMirroredOffset,
		LastMirroredEpoch:    r.LastMirroredEpoch,
		SourceClusterID:      r.SourceClusterID,
		SourceTopicID:        r.SourceTopicID,
		DestinationClusterID: r.DestinationClusterID,
	})
}

func marshalValue(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("encoding a __mirror_state value: %w", err)
	}
	return b, nil
}

// ---- decoding ----

// checkVersion reads only the "v" field, before the value is decoded in
// full, so that a newer version whose fields changed type is reported as a
// version problem rather than as a confusing type error.
func checkVersion(key string, data []byte) error {
	var h struct {
		V *int `json:"v"`
	}
	if err := json.Unmarshal(data, &h); err != nil {
		return fmt.Errorf("__mirror_state record %q: value is not a JSON object with a version: %w", key, err)
	}
	switch {
	case h.V == nil:
		return fmt.Errorf("__mirror_state record %q: value has no version field \"v\"", key)
	case *h.V > recordVersion:
		return &RecordVersionError{Key: key, Version: *h.V, Known: recordVersion}
	case *h.V < 1:
		return fmt.Errorf("__mirror_state record %q: invalid value version %d", key, *h.V)
	}
	return nil
}

func unmarshalValue(key string, data []byte, v any) error {
	if err := checkVersion(key, data); err != nil {
		return err
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("__mirror_state record %q: %w", key, err)
	}
	return nil
}

// secretMode says what decodeMirror does with sealed fields.
type secretMode int8

const (
	// openSecrets decrypts them with the sealer (the store's own view).
	openSecrets secretMode = iota
	// dropSecrets leaves them empty: another cluster's store, whose
	// secrets are neither needed nor readable with our key.
	dropSecrets
)

// decodeMirror decodes a mirror value stored under key for the mirror name.
func decodeMirror(key, name string, data []byte, s *Sealer, mode secretMode) (MirrorRecord, error) {
	var v mirrorValueV1
	if err := unmarshalValue(key, data, &v); err != nil {
		return MirrorRecord{}, err
	}
	open := func(field, sealed string) (string, error) {
		if sealed == "" || mode == dropSecrets {
			return "", nil
		}
		if !isSealed(sealed) {
			return "", fmt.Errorf("__mirror_state record %q: %s is stored in clear; kafkamirror never writes secrets unencrypted, so the record was altered", key, field)
		}
		if s == nil {
			return "", fmt.Errorf("__mirror_state record %q: %s is encrypted: %w", key, field, ErrNoSecretKey)
		}
		plain, err := s.Open(sealed)
		if err != nil {
			return "", fmt.Errorf("__mirror_state record %q: %s: %w", key, field, err)
		}
		return plain, nil
	}
	m := MirrorRecord{
		Name: name,
		Source: SourceConnection{
			BootstrapServers: v.Source.BootstrapServers,
		},
		SourceClusterID: v.SourceClusterID,
		Sync: SyncSettings{
			TopicConfigs:        v.Sync.TopicConfigs,
			TopicConfigExcludes: v.Sync.TopicConfigExcludes,
			ConsumerGroups:      v.Sync.ConsumerGroups,
			GroupIncludes:       v.Sync.GroupIncludes,
			GroupExcludes:       v.Sync.GroupExcludes,
			ACLs:                v.Sync.ACLs,
		},
		CreatedAt: storeTime(v.CreatedAt),
	}
	if d := v.DestinationTopics; d != nil {
		m.DestinationTopics = DestinationTopicSettings{ReplicationFactor: d.ReplicationFactor, MinInsyncReplicas: d.MinInsyncReplicas}
	}
	if v.Sync.Interval != "" {
		d, err := time.ParseDuration(v.Sync.Interval)
		if err != nil {
			return MirrorRecord{}, fmt.Errorf("__mirror_state record %q: sync interval: %w", key, err)
		}
		m.Sync.Interval = d
	}
	t, a, err := withSecrets((*TLSSettings)(v.Source.TLS), (*SASLSettings)(v.Source.SASL), open)
	if err != nil {
		return MirrorRecord{}, err
	}
	m.Source.TLS, m.Source.SASL = t, a
	return m, nil
}

// withSecrets returns copies of the source's TLS and SASL settings with their secrets passed
// through f: seal on the way into the store, open on the way out. The wire structs have the
// settings' fields (a conversion pins that), so only the secrets differ.
func withSecrets(t *TLSSettings, a *SASLSettings, f func(field, secret string) (string, error)) (*TLSSettings, *SASLSettings, error) {
	var err error
	if t != nil {
		c := *t
		if c.ClientKeyPEM, err = f("source TLS client key", c.ClientKeyPEM); err != nil {
			return nil, nil, err
		}
		t = &c
	}
	if a != nil {
		c := *a
		if c.Password, err = f("source SASL password", c.Password); err != nil {
			return nil, nil, err
		}
		a = &c
	}
	return t, a, nil
}

func decodeTopicConfig(key string, data []byte) (TopicConfigRecord, error) {
	var v topicConfigValueV1
	if err := unmarshalValue(key, data, &v); err != nil {
		return TopicConfigRecord{}, err
	}
	if v.MirrorName == "" {
		return TopicConfigRecord{}, fmt.Errorf("__mirror_state record %q: empty mirror.name", key)
	}
	return TopicConfigRecord{MirrorName: v.MirrorName, Divergence: v.Divergence, SourceTopicID: v.SourceTopicID, Owner: v.Owner, ConfigsLeftOut: v.LeftOut}, nil
}

func decodePartition(key string, data []byte) (PartitionRecord, error) {
	var v partitionValueV1
	if err := unmarshalValue(key, data, &v); err != nil {
		return PartitionRecord{}, err
	}
	state, err := partitionstate.ParseState(v.State)
	if err != nil {
		return PartitionRecord{}, fmt.Errorf("__mirror_state record %q: state: %w", key, err)
	}
	prev, err := partitionstate.ParseState(v.Previous)
	if err != nil {
		return PartitionRecord{}, fmt.Errorf("__mirror_state record %q: previous state: %w", key, err)
	}
	return PartitionRecord{
		Status: partitionstate.Status{
			State:        state,
			Previous:     prev,
			StateEpoch:   v.StateEpoch,
			Error:        v.Error,
			RetryAttempt: v.RetryAttempt,
			RetryAt:      storeTime(v.RetryAt),
		},
		UpdatedAt: storeTime(v.UpdatedAt),
	}, nil
}

func decodeLastMirror(key string, data []byte) (LastMirrorRecord, error) {
	var v lastMirrorValueV1
	if err := unmarshalValue(key, data, &v); err != nil {
		return LastMirrorRecord{}, err
	}
	return LastMirrorRecord{
		LastMirroredOffset:   v.LastMirroredOffset,
		LastMirroredEpoch:    v.LastMirroredEpoch,
		SourceClusterID:      v.SourceClusterID,
		SourceTopicID:        v.SourceTopicID,
		DestinationClusterID: v.DestinationClusterID,
	}, nil
}

// ---- copies and redaction ----

// clone returns a deep copy, so callers of the store can neither change its
// view nor see it change under them.
func (m MirrorRecord) clone() MirrorRecord {
	c := m
	c.Source.BootstrapServers = cloneStrings(m.Source.BootstrapServers)
	if m.Source.TLS != nil {
		t := *m.Source.TLS
		c.Source.TLS = &t
	}
	if m.Source.SASL != nil {
		a := *m.Source.SASL
		c.Source.SASL = &a
	}
	c.Sync.TopicConfigExcludes = cloneStrings(m.Sync.TopicConfigExcludes)
	c.Sync.GroupIncludes = cloneStrings(m.Sync.GroupIncludes)
	c.Sync.GroupExcludes = cloneStrings(m.Sync.GroupExcludes)
	return c
}

// cloneStrings keeps nil nil and empty empty (slices.Clone does too, but
// the distinction is load-bearing here, so say so).
func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append(make([]string, 0, len(s)), s...)
}

const Redacted = kafkaconn.Redacted
