package api

import "fmt"

// MaxReplicationFactor is the largest replication factor Kafka takes (an int16).
const MaxReplicationFactor = 32767

// Check returns why d cannot be used, or nil: a replication factor from 1 to 32767,
// min.insync.replicas at least 1 and, when both are given, at most the replication factor
// (0 leaves either to its default).
func (d DestinationTopics) Check() error {
	switch {
	case d.ReplicationFactor < 0 || d.ReplicationFactor > MaxReplicationFactor:
		return fmt.Errorf("destination_topics.replication_factor %d: want 1 to %d (or leave it out: the source topic's)", d.ReplicationFactor, MaxReplicationFactor)
	case d.MinInsyncReplicas < 0 || d.MinInsyncReplicas > MaxReplicationFactor:
		return fmt.Errorf("destination_topics.min_insync_replicas %d: want 1 to %d (or leave it out)", d.MinInsyncReplicas, MaxReplicationFactor)
	case d.ReplicationFactor > 0 && d.MinInsyncReplicas > d.ReplicationFactor:
		return fmt.Errorf("destination_topics.min_insync_replicas %d is more than replication_factor %d: no producer with acks=all could write",
			d.MinInsyncReplicas, d.ReplicationFactor)
	}
	return nil
}
