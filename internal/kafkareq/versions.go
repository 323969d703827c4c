package kafkareq

import (
	"context"
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The Kafka versions each side must run, from the requests the worker sends it. The source
// is only read, so it needs far less than the destination, which the worker writes as a
// transactional producer and whose transactions it must find again after a crash.

// apiRequirement is a request a side must answer, from version minVersion on.
type apiRequirement struct {
	key        kmsg.Key
	minVersion int16
	since      string // the Apache Kafka release that has it
	why        string
}

// MinSourceKafka and MinDestinationKafka are the oldest Apache Kafka releases each side
// supports: the newest `since` of its requirements.
const (
	MinSourceKafka      = "2.1"
	MinDestinationKafka = "3.0"
)

var sourceRequirements = []apiRequirement{
	{kmsg.Metadata, 1, "0.10", "finding partition leaders"},
	{kmsg.Fetch, 9, "2.1", "reading raw record batches with their transaction markers, the log start and the current leader epoch"},
	{kmsg.ListOffsets, 4, "2.1", "the log start and end offsets"},
	{kmsg.DescribeConfigs, 0, "0.11", "copying topic configs"},
	{kmsg.OffsetForLeaderEpoch, 2, "2.1", "detecting a truncated source (unclean leader election)"},
}

var destinationRequirements = []apiRequirement{
	{kmsg.Produce, 3, "0.11", "writing record batches v2 with idempotent producer ids"},
	{kmsg.InitProducerID, 0, "0.11", "idempotent and transactional producers"},
	{kmsg.AddPartitionsToTxn, 0, "0.11", "replaying source transactions"},
	{kmsg.EndTxn, 0, "0.11", "commit and abort markers at the source's offsets"},
	{kmsg.DeleteRecords, 0, "0.11", "moving the log start with the source's"},
	{kmsg.CreateTopics, 2, "1.0", "creating destination topics"},
	{kmsg.IncrementalAlterConfigs, 0, "2.3", "syncing topic configs"},
	{kmsg.DescribeProducers, 0, "2.8", "finding open transactions after a restart and at failback"},
	{kmsg.ListTransactions, 0, "3.0", "adopting the mirror's open transactions after a restart"},
	{kmsg.DescribeTransactions, 0, "3.0", "adopting the mirror's open transactions after a restart"},
}

// UnsupportedBrokerError is a cluster too old for its side of a mirror. It never heals by
// retrying: the operator must upgrade the cluster.
type UnsupportedBrokerError struct {
	Side    string // "source" or "destination"
	Broker  int32
	Missing []string // "ListTransactions (API key 66) v0+, Apache Kafka 3.0+: adopting …"
	Minimum string
}

func (e *UnsupportedBrokerError) Error() string {
	return fmt.Sprintf("the %s cluster's broker %d does not support %s; kafkamirror needs Apache Kafka %s or newer as the %s (see the version matrix in the README)",
		e.Side, e.Broker, strings.Join(e.Missing, "; "), e.Minimum, e.Side)
}

// CheckBrokerVersions asks every broker of cl for its API versions and returns an
// *UnsupportedBrokerError for the first that lacks a requirement of side.
func CheckBrokerVersions(ctx context.Context, cl *kgo.Client, side string) error {
	reqs, minimum := sourceRequirements, MinSourceKafka
	if side == "destination" {
		reqs, minimum = destinationRequirements, MinDestinationKafka
	}
	versions, err := kadm.NewClient(cl).ApiVersions(ctx)
	if err != nil {
		return fmt.Errorf("asking the %s cluster for its API versions: %w", side, err)
	}
	for _, v := range versions.Sorted() {
		if v.Err != nil {
			return fmt.Errorf("asking %s broker %d for its API versions: %w", side, v.NodeID, v.Err)
		}
		if missing := missingRequirements(reqs, v.KeyMaxVersion); len(missing) > 0 {
			return &UnsupportedBrokerError{Side: side, Broker: v.NodeID, Missing: missing, Minimum: minimum}
		}
	}
	return nil
}

// missingRequirements lists the requirements a broker's maximum versions do not meet.
func missingRequirements(reqs []apiRequirement, maxVersion func(int16) (int16, bool)) []string {
	var missing []string
	for _, r := range reqs {
		if max, ok := maxVersion(int16(r.key)); !ok || max < r.minVersion {
			missing = append(missing, fmt.Sprintf("%s (API key %d) v%d+, Apache Kafka %s+: %s", r.key.Name(), r.key, r.minVersion, r.since, r.why))
		}
	}
	return missing
}
