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

// The Apache Kafka versions of the real-broker tier: the newest that Maven Central serves,
// and the last 3.x line, which the destination side of the version matrix runs too: many
// clusters still run it, and it finalizes no transaction.version, so its transactions keep
// one producer epoch and add partitions with AddPartitionsToTxn, as on 4.x clusters upgraded
// from 3.x until their operators raise it; 4.x formats new clusters at transaction.version 2
// (KIP-890: an epoch bump at every transaction's end, partitions added by the produce).
const (
	KafkaNewest = "4.4.0"
	KafkaOldest = "3.9.1"
)

//go:embed maven/pom.xml
var brokerPOM []byte

//go:embed maven/connect-mirror.xml
var mirrorMakerPOM []byte

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
	return fetchJars(ctx, "kafka", "kafka_2.13", version, brokerPOM)
}

// FetchMirrorMaker is FetchKafka for MirrorMaker 2 (org.apache.kafka:connect-mirror and
// what it runs on), which the benchmark command (tools/bench) runs as its peer baseline.
func FetchMirrorMaker(ctx context.Context, version string) (string, error) {
	return fetchJars(ctx, "connect-mirror", "connect-mirror", version, mirrorMakerPOM)
}

// fetchJars fetches pom's runtime dependencies at version into the cache folder
// name-version/libs, unless its marker jar (artifact-version.jar) is already there.
func fetchJars(ctx context.Context, name, artifact, version string, pomText []byte) (string, error) {
	cache, err := KafkaCacheDir()
	if err != nil {
		return "", err
	}
	dir := name + "-" + version
	libs := filepath.Join(cache, dir, "libs")
	marker := filepath.Join(libs, artifact+"-"+version+".jar")
	if _, err := os.Stat(marker); err == nil {
		return libs, nil
	}
	if _, err := exec.LookPath("mvn"); err != nil {
		return "", fmt.Errorf("kafkatest: %s %s is not in %s and Maven (mvn) is not installed to fetch it", artifact, version, cache)
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	work, err := os.MkdirTemp(cache, "fetch-"+dir+"-")
	if err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	defer os.RemoveAll(work)
	pom := filepath.Join(work, "pom.xml")
	if err := os.WriteFile(pom, pomText, 0o644); err != nil {
		return "", fmt.Errorf("kafkatest: %w", err)
	}
	out := filepath.Join(work, dir, "libs")
	cmd := exec.CommandContext(ctx, "mvn", "-B", "-q", "-f", pom, "-Dkafka.version="+version,
		mavenDependencyPlugin, "-DincludeScope=runtime", "-DoutputDirectory="+out)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kafkatest: fetching %s %s with Maven: %w\n%s", artifact, version, err, lastLines(log.String(), 30))
	}
	if err := os.Rename(filepath.Join(work, dir), filepath.Join(cache, dir)); err != nil && !errors.Is(err, fs.ErrExist) {
		// Another process finished first: its copy is as good as ours.
		if _, statErr := os.Stat(marker); statErr != nil {
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
