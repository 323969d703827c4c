package kafkatest

import (
	"bytes"
	"context"
	_ "embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The Apache Kafka versions of the real-broker tier: the newest 4.x that Maven Central
// serves, and the oldest 4.0.x, which the destination side of the version matrix runs.
const (
	KafkaNewest = "4.4.0"
	KafkaOldest = "4.0.0"
)

//go:embed maven/pom.xml
var brokerPOM []byte

// mavenDependencyPlugin is named by its full coordinates so that no plugin prefix
// resolution (and no settings.xml) is needed on a fresh machine.
const mavenDependencyPlugin = "org.apache.maven.plugins:maven-dependency-plugin:3.8.1:copy-dependencies"

// KafkaCacheDir is where FetchKafka keeps the broker's jars, one folder per version:
// $KAFKAMIRROR_KAFKA_CACHE, or kafkamirror/ under the user's cache directory. It lies outside
// the repository; nothing downloaded is committed.
func KafkaCacheDir() (string, error) {
	if d := os.Getenv("KAFKAMIRROR_KAFKA_CACHE"); d != "" {
		return d, nil
	}
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("kafkatest: no cache directory for the Kafka broker (set KAFKAMIRROR_KAFKA_CACHE): %w", err)
	}
	return filepath.Join(base, "kafkamirror"), nil
}

// FetchKafka makes sure the jars of Apache Kafka version (the broker, kafka-tools and a
// log4j2 binding) are in the cache and returns their folder. The first call on a machine runs
// Maven against Maven Central; later calls only look. Concurrent first calls each download
// into a folder of their own and the first to finish wins, so no lock is needed.
func FetchKafka(ctx context.Context, version string) (string, error) {
	cache, err := KafkaCacheDir()
	if err != nil {
		return "", err
	}
	libs := filepath.Join(cache, "kafka-"+version, "libs")
	if _, err := os.Stat(filepath.Join(libs, "kafka_2.13-"+version+".jar")); err == nil {
		return libs, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("kafkatest: Apache Kafka %s is not in %s and Maven (mvn) is not installed to fetch it", version, cache)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	work, err := os.MkdirTemp(cache, "fetch-"+version+"-")
	if err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	defer os.RemoveAll(work)
	pom := filepath.Join(work, "pom.xml")
	if err := os.WriteFile(pom, brokerPOM, 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	out := filepath.Join(work, "kafka-"+version, "libs")
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-f", pom, "-Dkafka.version="+version,
		mavenDependencyPlugin, "-DincludeScope=runtime", "-DoutputDirectory="+out)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkatest: fetching Apache Kafka %s with Maven: %w\n%s", version, err, lastLines(log.String(), 30))
	}
	if err := os.Rename(filepath.Join(work, "kafka-"+version), filepath.Join(cache, "kafka-"+version)); err != nil && !errors.Is(err, fs.ErrExist) {
		// Another process finished first: its copy is as good as ours.
		if _, statErr := os.Stat(filepath.Join(libs, "kafka_2.13-"+version+".jar")); statErr != nil {
			return "", fmt.Errorf("kafkatest: %w", err)
		}
	}
	return libs, nil
}

// lastLines returns at most n trailing lines of s.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
