package datapath

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorerr"
)

// A real broker recompresses to the destination topic's compression.type and checks
// max.message.bytes again: head-alignment filler must be written in that codec and fit.
func TestKafkaMirrorFillerFitsDestinationLimits(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		fillerFitsDestinationLimits(t, src, dst, topic, 300_000)
	})
}

// A batch that fits as the source compressed it but not once the destination recompresses
// it to its compression.type: the broker answers MESSAGE_TOO_LARGE, a FAILED naming both.
func TestKafkaMirrorBatchTooLargeOnceRecompressed(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		createUncompressedLimited(t, src, dst, topic, "2000")
		prod := src.ManualProducer(t, kgo.ProducerBatchCompression(kgo.SnappyCompression()))
		kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: topic, Value: []byte("small")})
		kafkatest.ProduceSync(t, prod, &kgo.Record{Topic: topic, Value: bytes.Repeat([]byte("x"), 10_000)})
		run := startMirror(t, src, dst, topic, 1, true)
		err := run.waitErr(t, 0)
		var tooLarge *mirrorerr.BatchTooLargeError
		if !errors.As(err, &tooLarge) || tooLarge.Offset != 1 || tooLarge.Compression != "uncompressed" || mirrorerr.Classify(err) != mirrorerr.OperatorActs {
			t.Fatalf("mirror error %v, want the batch at offset 1 too large once recompressed", err)
		}
	})
}

// A destination that refuses a record (here one without a key, in a topic compacted only on
// the destination: Kafka answers INVALID_RECORD naming it) fails the partition with the
// broker's message, for the runner to retry with back-off, rather than retrying it in place
// behind a growing lag.
func TestKafkaMirrorDestinationRefusesRecord(t *testing.T) {
	onKafkaTopic(t, func(t *testing.T, src, dst *kafkatest.Cluster, topic string) {
		src.CreateTopic(t, topic, 1, nil)
		dst.CreateTopic(t, topic, 1, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
		kafkatest.ProduceSync(t, src.ManualProducer(t), &kgo.Record{Topic: topic, Value: []byte("without a key")})
		run := startMirror(t, src, dst, topic, 1, true)
		err := run.waitErr(t, 0)
		if !errors.Is(err, kerr.InvalidRecord) || !strings.Contains(err.Error(), "without key") || mirrorerr.Classify(err) != mirrorerr.RunnerRetries {
			t.Fatalf("mirror error %v, want INVALID_RECORD naming the record without a key, for the runner to retry with back-off", err)
		}
	})
}
