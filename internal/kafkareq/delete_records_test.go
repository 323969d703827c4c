package kafkareq_test

import (
	"context"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// Apache Kafka's leader moves its log start at once and answers DeleteRecords
// REQUEST_TIMED_OUT while a replica has not taken it: a leader already there is
// done, a leader below it is not.
func TestDeleteRecordsIsDoneWhenTheLeaderMovedItsLogStart(t *testing.T) {
	kafkatest.RequireFake(t)
	c := kafkatest.New(t)
	c.CreateTopic(t, "t", 1, nil)
	kafkatest.ProduceSync(t, c.ManualProducer(t), kafkatest.Records("t", 0, 30, "r")...)
	dst := kafkareq.NewCluster("destination", c.Client(t))
	ctx := context.Background()
	if err := dst.DeleteRecords(ctx, "t", 0, 10); err != nil {
		t.Fatal(err)
	}

	// Every later DeleteRecords times out waiting for its followers.
	c.Fake().ControlKey(int16(kmsg.DeleteRecords), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		del := req.(*kmsg.DeleteRecordsRequest)
		resp := del.ResponseKind().(*kmsg.DeleteRecordsResponse)
		for _, rt := range del.Topics {
			st := kmsg.NewDeleteRecordsResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewDeleteRecordsResponseTopicPartition()
				sp.Partition, sp.ErrorCode, sp.LowWatermark = rp.Partition, kerr.RequestTimedOut.Code, -1
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	if err := dst.DeleteRecords(ctx, "t", 0, 10); err != nil {
		t.Errorf("DeleteRecords to the leader's log start 10, answered REQUEST_TIMED_OUT: %v, want done", err)
	}
	if err := dst.DeleteRecords(ctx, "t", 0, 20); !errors.Is(err, kerr.RequestTimedOut) {
		t.Errorf("DeleteRecords to 20 past the leader's log start 10, answered REQUEST_TIMED_OUT: %v, want that error", err)
	}
}
