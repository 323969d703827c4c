package kafkatest

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A leader elected a moment ago learns the high watermark its predecessor advertised only
// from its followers' next fetches: until then its high watermark lies below offsets its log
// holds and readers of the old leader saw (Partition.makeLeader keeps the follower's high
// watermark; the old leader, now following it, logs "Non-monotonic update of high
// watermark"). KIP-207 has ListOffsets answer OFFSET_NOT_AVAILABLE only while that high
// watermark lies below the new epoch's start offset. kfake's leaders never lag, and a real
// broker cannot be made to on demand (the randomized test's leader moves met it by chance).

// LagHighWatermark answers the next n ListOffsets requests for the latest offset of topic's
// partition with its high watermark less by, as a leader elected a moment ago; its log, and
// what fetches and OffsetForLeaderEpoch read of it, stays whole. Not for a cluster with a
// Cleaner: the log starts it keeps are not applied here.
func (c *Cluster) LagHighWatermark(t TB, topic string, partition int32, by int64, n int) *Faults {
	t.Helper()
	return c.shrinkLogEnd(t, topic, partition, by, n, false)
}

// LoseLogEnd makes the last `by` offsets of topic's partition look lost for the next n
// ListOffsets requests for its latest offset, and to OffsetForLeaderEpoch meanwhile: what a
// source truncated by an unclean leader election answers.
func (c *Cluster) LoseLogEnd(t TB, topic string, partition int32, by int64, n int) *Faults {
	t.Helper()
	return c.shrinkLogEnd(t, topic, partition, by, n, true)
}

func (c *Cluster) shrinkLogEnd(t TB, topic string, partition int32, by int64, n int, logEndToo bool) *Faults {
	t.Helper()
	if c.fake == nil {
		t.Fatalf("kafkatest: offset faults need a kfake cluster, %s is real Kafka", c.id)
		return nil
	}
	if c.fake.TopicInfo(topic) == nil {
		t.Fatalf("kafkatest: offset faults: no topic %q on %s", topic, c.id)
		return nil
	}
	f := c.listOffsetsFaults(offsetFault{topic: topic, partition: partition, by: by}, n)
	if logEndToo {
		c.fake.ControlKey(int16(kmsg.OffsetForLeaderEpoch), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
			c.fake.KeepControl()
			if f.served() {
				c.fake.DropControl()
				return nil, nil, false
			}
			req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
			if len(req.Topics) != 1 || req.Topics[0].Topic != topic || len(req.Topics[0].Partitions) != 1 || req.Topics[0].Partitions[0].Partition != partition {
				return nil, nil, false
			}
			pi := c.fake.PartitionInfo(topic, partition)
			rp := req.Topics[0].Partitions[0]
			if pi == nil || c.fake.LeaderFor(topic, partition) != c.fake.CurrentNode() || rp.LeaderEpoch != pi.Epoch {
				return nil, nil, false // only the current epoch's end is shrunk
			}
			resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
			st := kmsg.NewOffsetForLeaderEpochResponseTopic()
			st.Topic = topic
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = partition, pi.Epoch, max(pi.HighWatermark-by, pi.LogStartOffset)
			st.Partitions = append(st.Partitions, sp)
			resp.Topics = append(resp.Topics, st)
			return resp, nil, true
		})
	}
	return f
}

// LogNotCreated answers the next n ListOffsets requests that ask for topic's partition with
// NOT_LEADER_OR_FOLLOWER for it, and the request's other partitions from kfake's state: what
// an Apache Kafka leader answers for a new topic's partition until it created the partition's
// log, which it does one partition after another for seconds after CreateTopics answered
// (1,000 partitions on 4.4: the last listable 1.4 to 6.9 s after).
func (c *Cluster) LogNotCreated(t TB, topic string, partition int32, n int) *Faults {
	t.Helper()
	if c.fake == nil || c.fake.TopicInfo(topic) == nil {
		t.Fatalf("kafkatest: offset faults need a kfake cluster with topic %q, %s is not", topic, c.id)
		return nil
	}
	return c.listOffsetsFaults(offsetFault{topic: topic, partition: partition, notCreated: true}, n)
}

// offsetFault is how a fault changes one partition's ListOffsets answers.
type offsetFault struct {
	topic      string
	partition  int32
	by         int64 // its latest offset less by
	notCreated bool  // NOT_LEADER_OR_FOLLOWER for any offset of it
}

// listOffsetsFaults answers the next n ListOffsets requests that fault applies to.
func (c *Cluster) listOffsetsFaults(fault offsetFault, n int) *Faults {
	f := newFaults(n)
	c.fake.ControlKey(int16(kmsg.ListOffsets), func(kreq kmsg.Request) (kmsg.Response, error, bool) {
		c.fake.KeepControl()
		if f.served() {
			c.fake.DropControl()
			return nil, nil, false
		}
		resp := listedOffsets(c, kreq.(*kmsg.ListOffsetsRequest), fault)
		if resp == nil || !f.take() {
			return nil, nil, false
		}
		return resp, nil, true
	})
	return f
}

// listedOffsets answers from kfake's state, as fault changes it, a ListOffsets request that
// asks for the latest offset of the fault's partition (any offset of it when notCreated);
// nil (kfake answers) for any other request, or one asking for other timestamps than the
// earliest and latest.
func listedOffsets(c *Cluster, req *kmsg.ListOffsetsRequest, fault offsetFault) *kmsg.ListOffsetsResponse {
	asks := false
	for _, rt := range req.Topics {
		for _, rp := range rt.Partitions {
			if rp.Timestamp != -1 && rp.Timestamp != earliestOffset {
				return nil
			}
			asks = asks || (rt.Topic == fault.topic && rp.Partition == fault.partition && (rp.Timestamp == -1 || fault.notCreated))
		}
	}
	if !asks || req.ReplicaID == debugReplica {
		return nil
	}
	resp := req.ResponseKind().(*kmsg.ListOffsetsResponse)
	for _, rt := range req.Topics {
		st := kmsg.NewListOffsetsResponseTopic()
		st.Topic = rt.Topic
		for _, rp := range rt.Partitions {
			sp := kmsg.NewListOffsetsResponseTopicPartition()
			sp.Partition, sp.Timestamp = rp.Partition, -1
			pi := c.fake.PartitionInfo(rt.Topic, rp.Partition)
			switch {
			case pi == nil:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case c.fake.LeaderFor(rt.Topic, rp.Partition) != c.fake.CurrentNode(),
				fault.notCreated && rt.Topic == fault.topic && rp.Partition == fault.partition:
				sp.ErrorCode = kerr.NotLeaderForPartition.Code
			case rp.Timestamp == earliestOffset:
				sp.Offset, sp.LeaderEpoch = pi.LogStartOffset, pi.Epoch
			default:
				end := pi.HighWatermark
				if req.IsolationLevel == 1 {
					end = pi.LastStableOffset
				}
				if rt.Topic == fault.topic && rp.Partition == fault.partition {
					end = max(end-fault.by, pi.LogStartOffset)
				}
				sp.Offset, sp.LeaderEpoch = end, pi.Epoch
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}
