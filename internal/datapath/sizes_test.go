package datapath

import (
	"bytes"
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

// Head-alignment filler fits a destination topic that keeps batches uncompressed with a
// small max.message.bytes: the filler is split instead of refused for ever.
func TestMirrorFillerFitsDestinationLimits(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	fillerFitsDestinationLimits(t, src, dst, "small", 1_500_000)
}

// fillerFitsDestinationLimits mirrors topic, its source log start advanced to logStart, to a
// destination topic that keeps batches uncompressed below 100000 bytes.
func fillerFitsDestinationLimits(t *testing.T, src, dst *kafkatest.Cluster, topic string, logStart int64) {
	createUncompressedLimited(t, src, dst, topic, "100000")
	advanceSource(t, src, topic, logStart)
	kafkatest.ProduceSync(t, src.ManualProducer(t), kafkatest.Records(topic, 0, 50, "x")...)
	mirrorIdentical(t, src, dst, topic, 1, true)
}

// createUncompressedLimited creates topic on src and on dst, where it keeps batches
// uncompressed and no larger than maxMessageBytes.
func createUncompressedLimited(t *testing.T, src, dst *kafkatest.Cluster, topic, maxMessageBytes string) {
	t.Helper()
	src.CreateTopic(t, topic, 1, nil)
	dst.CreateTopic(t, topic, 1, map[string]*string{
		"max.message.bytes": kadm.StringPtr(maxMessageBytes),
		"compression.type":  kadm.StringPtr("uncompressed"),
	})
}

// A source batch larger than the destination topic accepts stops the partition with a
// message naming the offset and both sizes.
func TestMirrorBatchLargerThanDestinationAllows(t *testing.T) {
	src, dst := kafkatest.Pair(t)
	src.CreateTopic(t, "large", 1, nil)
	dst.CreateTopic(t, "large", 1, map[string]*string{"max.message.bytes": kadm.StringPtr("2000")})
	prod := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.NoCompression()))
	kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: "large", Value: []byte("small")})
	kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: "large", Value: bytes.Repeat([]byte("x"), 10_000)})

	run := startMirror(t, src, dst, "large", 1, true)
	err := run.waitErr(t, 0)
	var tooLarge *mirrorerr.BatchTooLargeError
	if !errors.As(err, &tooLarge) || tooLarge.Offset != 1 || tooLarge.MaxMessageBytes != 2000 || tooLarge.Size <= 2000 {
		t.Fatalf("mirror error %v, want the batch at offset 1 larger than max.message.bytes 2000", err)
	}
	if mirrorerr.Classify(err) != mirrorerr.OperatorActs {
		t.Fatalf("%v is retried", err)
	}
}
