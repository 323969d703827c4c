package main

// Conversions between the API's wire types and the engine's. Responses are built only from
// the engine's descriptions (MirrorDescription has no secret fields), never from a
// MirrorRecord, so no code path can echo a password or a client key.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorstate"
)

func sourceFromAPI(s api.SourceConnection) mirrorstate.SourceConnection {
	out := mirrorstate.SourceConnection{BootstrapServers: s.BootstrapServers}
	if t := s.TLS; t != nil {
		out.TLS = &mirrorstate.TLSSettings{
			CACertPEM: t.CACertPEM, ClientCertPEM: t.ClientCertPEM, ClientKeyPEM: t.ClientKeyPEM,
			InsecureSkipVerify: t.InsecureSkipVerify, ServerName: t.ServerName,
		}
	}
	if a := s.SASL; a != nil {
		out.SASL = &mirrorstate.SASLSettings{Mechanism: a.Mechanism, Username: a.Username, Password: a.Password}
	}
	return out
}

func syncFromAPI(s *api.SyncSettings) (mirrorstate.SyncSettings, error) {
	if s == nil {
		d := api.DefaultSync()
		s = &d
	}
	interval := api.DefaultSyncInterval
	if s.Interval != "" {
		d, err := api.SyncIntervalRange.Parse(s.Interval)
		if err != nil {
			return mirrorstate.SyncSettings{}, badRequest(api.CodeInvalidClusterMirrorConfig, "sync.interval: %v", err)
		}
		interval = d
	}
	return mirrorstate.SyncSettings{
		Interval: interval, TopicConfigs: s.TopicConfigs, TopicConfigExcludes: s.TopicConfigExcludes,
		ConsumerGroups: s.ConsumerGroups, GroupIncludes: s.GroupIncludes, GroupExcludes: s.GroupExcludes, ACLs: s.ACLs,
	}, nil
}

// destinationTopicsFromAPI checks and converts a mirror's destination topic settings; nil
// means the defaults.
func destinationTopicsFromAPI(d *api.DestinationTopics) (mirrorstate.DestinationTopicSettings, error) {
	if d == nil {
		return mirrorstate.DestinationTopicSettings{}, nil
	}
	if err := d.Check(); err != nil {
		return mirrorstate.DestinationTopicSettings{}, badRequest(api.CodeInvalidClusterMirrorConfig, "%v", err)
	}
	return mirrorstate.DestinationTopicSettings{ReplicationFactor: int16(d.ReplicationFactor), MinInsyncReplicas: d.MinInsyncReplicas}, nil
}

func syncToAPI(s mirrorstate.SyncSettings) api.SyncSettings {
	out := api.SyncSettings{
		TopicConfigs: s.TopicConfigs, TopicConfigExcludes: s.TopicConfigExcludes,
		ConsumerGroups: s.ConsumerGroups, GroupIncludes: s.GroupIncludes, GroupExcludes: s.GroupExcludes, ACLs: s.ACLs,
	}
	if s.Interval > 0 {
		out.Interval = s.Interval.String()
	}
	return out
}

// mirrorToAPI builds the answer about a mirror. TLS is an empty object when on: the engine
// does not hand PEM data back, and a client key must never be returned anyway.
func mirrorToAPI(d mirrorengine.MirrorDescription) api.Mirror {
	out := api.Mirror{
		Name:            d.Name,
		Source:          api.SourceConnection{BootstrapServers: d.SourceBootstrapServers},
		SourceClusterID: d.SourceClusterID,
		Sync:            syncToAPI(d.Sync),
		CreatedAt:       d.CreatedAt,
		Topics:          d.Topics,
		TopicCount:      len(d.Topics),
		SyncErrors:      d.SyncStatus.Errors,
		Error:           d.Error,

		SyncSkippedActiveGroups: d.SyncStatus.SkippedActiveGroups,
	}
	out.DestinationTopics = api.DestinationTopics{
		ReplicationFactor: int(d.DestinationTopics.ReplicationFactor), MinInsyncReplicas: d.DestinationTopics.MinInsyncReplicas,
	}
	if out.SyncErrors == nil {
		out.SyncErrors = map[string]string{}
	}
	if out.Source.BootstrapServers == nil {
		out.Source.BootstrapServers = []string{}
	}
	if out.Topics == nil {
		out.Topics = []string{}
	}
	if d.TLS {
		out.Source.TLS = &api.TLS{}
	}
	if d.SASLMechanism != "" {
		out.Source.SASL = &api.SASL{Mechanism: d.SASLMechanism, Username: d.SASLUsername}
	}
	return out
}

func topicToAPI(d mirrorengine.TopicDescription) api.Topic {
	out := api.Topic{
		Mirror: d.Mirror, Topic: d.Topic, MirrorName: d.MirrorName, DesiredState: d.Desired.String(), Divergence: d.Divergence,
		ConfigsLeftOut: d.ConfigsLeftOut,
		Partitions:     make([]api.Partition, 0, len(d.Partitions)),
	}
	for _, p := range d.Partitions {
		out.Partitions = append(out.Partitions, api.Partition{
			Partition: p.Partition, State: p.State.String(),
			SourceOffset: p.SourceOffset, SourceOffsetAt: p.SourceOffsetAt,
			DestinationOffset: p.DestinationOffset, DestinationOffsetAt: p.DestinationOffsetAt,
			Unreachable: p.Unreachable, Lag: p.Lag,
			LastMirroredOffset: p.LastMirroredOffset, LastMirroredEpoch: p.LastMirroredEpoch,
			Error: p.Error, RetryAttempt: p.RetryAttempt,
		})
	}
	return out
}

// stateRecordToAPI builds the answer about a __mirror_state record, with its value when
// withValue: as JSON when it is JSON, else in base64.
func stateRecordToAPI(r mirrorstate.StateRecord, withValue bool) api.StateRecord {
	out := api.StateRecord{
		Key: r.Key, Kind: r.Kind, Mirror: r.Mirror, Topic: r.Topic, Partition: r.Partition,
		StatePartition: r.StatePartition, Offset: r.Offset, Problem: r.Problem,
	}
	switch {
	case !withValue:
	case json.Valid(r.Value):
		out.Value = r.Value
	default:
		out.ValueBase64 = base64.StdEncoding.EncodeToString(r.Value)
	}
	return out
}

func resultsToAPI(rs []mirrorengine.TopicResult) api.TopicResults {
	out := api.TopicResults{Results: make([]api.TopicResult, 0, len(rs))}
	for _, r := range rs {
		res := api.TopicResult{Topic: r.Topic, FinalSync: r.FinalSync}
		if r.Err != nil {
			res.ErrorCode, res.Message = r.Err.Code, r.Err.Message
		}
		out.Results = append(out.Results, res)
	}
	return out
}

// badRequest is a refusal with a 4xx status derived from the code.
func badRequest(code, format string, args ...any) *api.Error {
	return &api.Error{Status: api.StatusFor(code), Code: code, Message: fmt.Sprintf(format, args...)}
}
