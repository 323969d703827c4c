package datapath

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

// BenchmarkForward compares raw batch forwarding with the usual decode-and-re-produce path
// (a kgo consumer feeding a kgo producer), on compressed and uncompressed data. It reports
// MiB/s of record payload and the process CPU time per MiB; both clusters run in this
// process, so their CPU is included for both paths alike.
//
//	go test ./internal/datapath -run '^$' -bench Forward -benchtime 3x
func BenchmarkForward(b *testing.B) {
	const (
		records    = 20_000
		valueBytes = 1024
		partitions = 4
	)
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"uncompressed", kgo.NoCompression()}, {"zstd", kgo.ZstdCompression()}} {
		src := kafkatest.New(b, kafkatest.Lenient())
		dst := kafkatest.New(b, kafkatest.Lenient())
		src.CreateTopic(b, "bench", partitions, nil)
		prod := src.Client(b, kgo.ProducerBatchCompression(codec.codec), kgo.ProducerLinger(10*time.Millisecond))
		value := make([]byte, valueBytes)
		for i := range value {
			value[i] = byte('a' + i%7) // compressible, like most real payloads
		}
		recs := make([]*kgo.Record, records)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: "bench", Key: []byte(fmt.Sprint(i)), Value: value}
		}
		if err := prod.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
			b.Fatal(err)
		}
		payload := int64(records * valueBytes)

		b.Run("raw/"+codec.name, func(b *testing.B) {
			benchCopy(b, payload, func() {
				dst.CreateTopic(b, "bench", partitions, nil)
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				sc, dc := src.Client(b), dst.Client(b)
				var ms []*PartitionMirror
				for p := range int32(partitions) {
					m := NewPartitionMirror(sc, dc, PartitionConfig{Mirror: "bench", Topic: "bench", Partition: p})
					ms = append(ms, m)
					go m.Run(ctx) //nolint:errcheck // checked through progress
				}
				for {
					done := int64(0)
					for _, m := range ms {
						done += m.Progress().DestinationEnd
					}
					if done >= records {
						return
					}
					time.Sleep(time.Millisecond)
				}
			}, func() { deleteTopic(b, dst, "bench") })
		})

		b.Run("decode-reproduce/"+codec.name, func(b *testing.B) {
			benchCopy(b, payload, func() {
				dst.CreateTopic(b, "bench", partitions, nil)
				cons := src.Client(b, kgo.ConsumeTopics("bench"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
				out := dst.Client(b, kgo.ProducerBatchCompression(codec.codec), kgo.RecordPartitioner(kgo.ManualPartitioner()))
				copied := 0
				for copied < records {
					fs := cons.PollFetches(context.Background())
					var batch []*kgo.Record
					fs.EachRecord(func(r *kgo.Record) {
						batch = append(batch, &kgo.Record{Topic: r.Topic, Partition: r.Partition, Key: r.Key, Value: r.Value, Headers: r.Headers, Timestamp: r.Timestamp})
					})
					if err := out.ProduceSync(context.Background(), batch...).FirstErr(); err != nil {
						b.Fatal(err)
					}
					copied += len(batch)
				}
				cons.Close()
				out.Close()
			}, func() { deleteTopic(b, dst, "bench") })
		})
	}
}

// benchCopy times copy over b.N iterations, resetting the destination between them, and
// reports throughput and CPU per MiB.
func benchCopy(b *testing.B, payload int64, copyOnce, reset func()) {
	b.SetBytes(payload)
	var cpu time.Duration
	for i := 0; i < b.N; i++ {
		before := processCPU()
		copyOnce()
		cpu += processCPU() - before
		b.StopTimer()
		reset()
		b.StartTimer()
	}
	mib := float64(payload*int64(b.N)) / (1 << 20)
	b.ReportMetric(float64(cpu.Milliseconds())/mib, "cpu-ms/MiB")
}

func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func deleteTopic(b *testing.B, c *kafkatest.Cluster, topic string) {
	if _, err := c.Admin(b).DeleteTopic(context.Background(), topic); err != nil {
		b.Fatal(err)
	}
}
