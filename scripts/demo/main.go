// Command demo is the quickstart's helper: it produces sample data to a cluster, compares a
// topic on two clusters with the independent comparator, and writes a record to show a
// mirrored topic read-only (--refused) and a failed-over topic writable. --user and
// --password authenticate (SCRAM-SHA-256) to the destination, which in the worker's demo
// mode enforces ACLs: its demo user is "demo", password "demo-secret".
//
//	go run ./scripts/demo produce --bootstrap 127.0.0.1:19092 --topic orders
//	go run ./scripts/demo compare --source 127.0.0.1:19092 --destination 127.0.0.1:29092 --user demo --password demo-secret --topic orders
//	go run ./scripts/demo write --bootstrap 127.0.0.1:29092 --user demo --password demo-secret --topic orders [--refused]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	bootstrap := fs.String("bootstrap", "127.0.0.1:19092", "cluster to produce to or write to")
	source := fs.String("source", "127.0.0.1:19092", "source cluster (compare)")
	destination := fs.String("destination", "127.0.0.1:29092", "destination cluster (compare)")
	topic := fs.String("topic", "orders", "topic")
	partitions := fs.Int("partitions", 3, "partitions of the topic (produce creates it)")
	timeout := fs.Duration("timeout", time.Minute, "how long compare waits for the logs to become identical")
	user := fs.String("user", "", "SCRAM-SHA-256 user for the destination (write, compare)")
	password := fs.String("password", "", "its password")
	refused := fs.Bool("refused", false, "write: succeed only if the write is refused (TOPIC_AUTHORIZATION_FAILED), as on a mirrored topic")
	_ = fs.Parse(os.Args[2:])
	var auth []kgo.Opt
	if *user != "" {
		auth = append(auth, kgo.SASL(scram.Auth{User: *user, Pass: *password}.AsSha256Mechanism()))
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout+30*time.Second)
	defer cancel()
	var err error
	switch os.Args[1] {
	case "produce":
		err = produce(ctx, *bootstrap, *topic, int32(*partitions))
	case "compare":
		err = compare(ctx, *source, *destination, auth, *topic, *timeout)
	case "write":
		err = write(ctx, *bootstrap, auth, *topic, *refused)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "demo %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: demo produce|compare|write [flags]")
	os.Exit(2)
}

func client(bootstrap string, opts ...kgo.Opt) (*kgo.Client, error) {
	return kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(bootstrap, ",")...), kgo.RecordPartitioner(kgo.ManualPartitioner())}, opts...)...)
}

// produce creates the topic and writes plain, zstd- and lz4-compressed and transactional
// records (one transaction committed, one aborted) to every partition.
func produce(ctx context.Context, bootstrap, topic string, partitions int32) error {
	admCl, err := client(bootstrap)
	if err != nil {
		return err
	}
	defer admCl.Close()
	if _, err := kadm.NewClient(admCl).CreateTopic(ctx, partitions, -1, nil, topic); err != nil && !strings.Contains(err.Error(), "TOPIC_ALREADY_EXISTS") {
		return fmt.Errorf("creating %s: %w", topic, err)
	}
	total := 0
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"plain", kgo.NoCompression()}, {"zstd", kgo.ZstdCompression()}, {"lz4", kgo.Lz4Compression()}} {
		cl, err := client(bootstrap, kgo.ProducerBatchCompression(codec.codec))
		if err != nil {
			return err
		}
		var recs []*kgo.Record
		for p := range partitions {
			for i := range 100 {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: fmt.Appendf(nil, "%s-%d", codec.name, i%10),
					Value: fmt.Appendf(nil, "%s record %d of partition %d", codec.name, i, p), Headers: []kgo.RecordHeader{{Key: "codec", Value: []byte(codec.name)}}})
			}
		}
		err = cl.ProduceSync(ctx, recs...).FirstErr()
		cl.Close()
		if err != nil {
			return fmt.Errorf("producing %s records: %w", codec.name, err)
		}
		total += len(recs)
	}
	txn, err := client(bootstrap, kgo.TransactionalID("kafkamirror-quickstart"))
	if err != nil {
		return err
	}
	defer txn.Close()
	for _, commit := range []kgo.TransactionEndTry{kgo.TryCommit, kgo.TryAbort} {
		if err := txn.BeginTransaction(); err != nil {
			return err
		}
		var recs []*kgo.Record
		for p := range partitions {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: fmt.Appendf(nil, "transactional record (commit=%v)", commit)})
		}
		if err := txn.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			return err
		}
		if err := txn.EndTransaction(ctx, commit); err != nil {
			return err
		}
		total += len(recs)
	}
	fmt.Printf("produced %d records to %s on %s (plain, zstd, lz4, one committed and one aborted transaction)\n", total, topic, bootstrap)
	return nil
}

// compare waits until the topic is identical on both clusters (offsets, batches, records,
// markers, log start, both isolation levels' views) and reports the first difference if not.
func compare(ctx context.Context, source, destination string, dstAuth []kgo.Opt, topic string, timeout time.Duration) error {
	src, err := client(source)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := client(destination, dstAuth...)
	if err != nil {
		return err
	}
	defer dst.Close()
	deadline := time.Now().Add(timeout)
	for {
		diff, err := kafkatest.CompareTopic(ctx, src, dst, topic)
		if err == nil && diff == nil {
			fmt.Printf("topic %s is identical on %s and %s, offset for offset\n", topic, source, destination)
			return nil
		}
		if time.Now().After(deadline) {
			if err != nil {
				return err
			}
			return diff
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// write appends one record, as an application would after failover; with refused, it
// proves the topic read-only instead.
func write(ctx context.Context, bootstrap string, auth []kgo.Opt, topic string, refused bool) error {
	cl, err := client(bootstrap, append(auth, kgo.RecordRetries(3))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	r := &kgo.Record{Topic: topic, Value: []byte("written by an application")}
	err = cl.ProduceSync(ctx, r).FirstErr()
	if refused {
		if !errors.Is(err, kerr.TopicAuthorizationFailed) {
			return fmt.Errorf("writing to the mirrored topic %s: got %v, want TOPIC_AUTHORIZATION_FAILED", topic, err)
		}
		fmt.Printf("writing to %s was refused (%v): the mirrored topic is read-only\n", topic, err)
		return nil
	}
	if err != nil {
		return fmt.Errorf("writing to %s: %w", topic, err)
	}
	fmt.Printf("wrote a record to %s[%d] at offset %d: the topic is writable\n", topic, r.Partition, r.Offset)
	return nil
}
