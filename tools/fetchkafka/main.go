// Command fetchkafka puts the Apache Kafka versions of the real-broker test tier into the
// per-machine cache (kafkatest.FetchKafka), so that the test command fetches them once,
// before the tests, with the download's errors in plain sight.
//
// Usage: go run ./tools/fetchkafka [version ...]   (default: kafkatest.KafkaVersions())
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

func main() {
	versions := os.Args[1:]
	if len(versions) == 0 {
		versions = kafkatest.KafkaVersions()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	for _, v := range versions {
		start := time.Now()
		libs, err := kafkatest.FetchKafka(ctx, v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fmt.Printf("Apache Kafka %s: %s (%v)\n", v, libs, time.Since(start).Round(time.Millisecond))
	}
}
