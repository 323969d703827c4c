// Command bench measures the worker against the destination's own ingest speed and against
// decode-and-re-produce copiers, on real Apache Kafka brokers and on kfake, every cluster and
// the worker in a process of its own (issue #16). It prints one table of ratios and one of the
// figures behind them. It is no test: nothing in ./scripts/test.sh runs it.
//
//	go run ./tools/bench                      # both cluster kinds, small defaults (a few minutes)
//	go run ./tools/bench -clusters kfake -mib 256 -idle-partitions 1000
//	go run ./tools/bench -only throughput -rounds 3 # medians and ranges over three rounds
//
// Throughput is the source's record payload (uncompressed MiB) divided by the time from the
// first offset seen on the destination to the last, so start-up (topic creation, MirrorMaker's
// Connect start) counts for no method. Worker CPU comes from /proc/<pid>/stat of the worker
// process alone.
package main

import (
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"regexp"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkatest"
)

type options struct {
	clusters       []string
	kafkaVersion   string
	kafkaBrokers   int
	mm2Version     string
	mm2            bool
	mib            int
	partitions     int
	valueBytes     int
	batchKiB       int
	idlePartitions int
	memPartitions  int
	samples        int
	busyFor        time.Duration
	busyWarmUp     time.Duration
	compacted      int
	holeRun        int
	headOffset     int64
	waitLimit      time.Duration
	only           map[string]bool
	workerLog      string
	workerLevel    string
	fetchMemory    int64
	rounds         int
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == kfakeChildArg {
		os.Exit(serveKfake(os.Stdin, os.Stdout))
	}
	var o options
	var clusters string
	flag.StringVar(&clusters, "clusters", "kafka,kfake", "cluster kinds to measure on, comma-separated: kafka (Apache Kafka brokers), kfake")
	flag.StringVar(&o.kafkaVersion, "kafka-version", kafkatest.KafkaNewest, "Apache Kafka version of the source and destination brokers")
	flag.IntVar(&o.kafkaBrokers, "kafka-brokers", 1, "brokers of each Apache Kafka cluster; the bench's topics, and so the mirrored ones, are replicated to up to 3 of them")
	flag.BoolVar(&o.mm2, "mm2", true, "run MirrorMaker 2 (dedicated mode) as the peer baseline on Apache Kafka")
	flag.StringVar(&o.mm2Version, "mm2-version", "4.0.0", "connect-mirror version (the newest Maven Central serves here)")
	flag.IntVar(&o.mib, "mib", 64, "record payload per codec, MiB")
	flag.IntVar(&o.partitions, "partitions", 8, "partitions of the throughput topics")
	flag.IntVar(&o.valueBytes, "value-bytes", 1024, "bytes per record value")
	flag.IntVar(&o.batchKiB, "batch-kib", 30, "source batch size before compression, KiB")
	flag.IntVar(&o.idlePartitions, "idle-partitions", 1000, "partitions of the idle-pickup topic")
	flag.IntVar(&o.memPartitions, "memory-partitions", 1000, "partitions mirrored to measure the worker's memory per partition")
	flag.IntVar(&o.samples, "samples", 20, "records written to idle partitions for the pickup latency")
	flag.DurationVar(&o.busyFor, "busy-for", 10*time.Second, "how long the busy partition is written beside 7 idle ones")
	flag.DurationVar(&o.busyWarmUp, "busy-warm-up", 5*time.Second, "how long the busy partition is written first, measured apart (fresh brokers compile their paths)")
	flag.IntVar(&o.compacted, "compacted-records", 10_000, "records written to the compacted topic before the cleaner runs")
	flag.IntVar(&o.holeRun, "hole-run", 100_000, "holes in a row in the second compacted topic (one key overwritten so often)")
	flag.Int64Var(&o.headOffset, "head-offset", 10_000_000, "source log start offset for head alignment")
	flag.DurationVar(&o.waitLimit, "wait", 5*time.Minute, "longest wait for one measurement")
	var only string
	flag.StringVar(&only, "only", "", "measurements to run, comma-separated (memory, throughput, head, busy, skewed, idle, compacted; default all)")
	flag.StringVar(&o.workerLog, "worker-log", "", "file that receives the worker's output of each cluster kind (suffixed with the kind)")
	flag.StringVar(&o.workerLevel, "worker-log-level", "warn", "the worker's log level (info or debug show where a start spends its time)")
	flag.Int64Var(&o.fetchMemory, "fetch-memory-bytes", 0, "the worker's fetch_memory_bytes (0: its default)")
	flag.IntVar(&o.rounds, "rounds", 1, "times the throughput measurement runs, each round every method in turn; its rows show the median of the rounds and their range")
	flag.Parse()
	if only != "" {
		o.only = map[string]bool{}
		for _, m := range strings.Split(only, ",") {
			o.only[m] = true
		}
	}
	o.clusters = strings.Split(clusters, ",")
	if o.kafkaBrokers < 1 {
		log.Fatalf("-kafka-brokers must be at least 1, not %d", o.kafkaBrokers)
	}
	if o.rounds < 1 {
		log.Fatalf("-rounds must be at least 1, not %d", o.rounds)
	}
	log.SetFlags(log.Ltime | log.Lmicroseconds)

	bin, cleanup, err := buildWorker()
	if err != nil {
		log.Fatalf("building the worker: %v", err)
	}
	defer cleanup()
	var results []*result
	for _, kind := range o.clusters {
		results = append(results, measureOn(kind, bin, o))
	}
	printTables(os.Stdout, results)
}

// result is every figure of one cluster kind, by round: a measurement repeated (-rounds)
// writes the same keys into a round of its own, and a row is computed from each round that
// has its figures, so a ratio pairs figures of one round. A measurement that could not be
// made keeps its reason in errs.
type result struct {
	kind   string
	rounds []map[string]float64
	errs   map[string]string
}

func (r *result) set(key string, v float64) { r.rounds[len(r.rounds)-1][key] = v }

// nextRound makes the figures set from now on those of a new round.
func (r *result) nextRound() { r.rounds = append(r.rounds, map[string]float64{}) }

// round is the number of the round being measured, from 0.
func (r *result) round() int { return len(r.rounds) - 1 }

// measureOn runs every measurement on one cluster kind. Each measurement recovers on its
// own, so that one failure (a FAILED partition, a wait that ran out) leaves the others.
func measureOn(kind, bin string, o options) *result {
	res := &result{kind: kind, rounds: []map[string]float64{{}}, errs: map[string]string{}}
	r := &runner{}
	defer r.close()
	ok := r.try(func() {
		b := newBench(r, kind, bin, o)
		for _, m := range []struct {
			name string
			run  func(*result)
		}{
			{"memory", b.memoryPerPartition}, // first: on a fresh worker
			{"throughput", b.throughputRounds},
			{"head", b.headAlignment},
			{"busy", b.busyBesideIdle},
			{"skewed", b.skewed},
			{"idle", b.idlePickup},
			{"compacted", b.compactedHoles},
		} {
			if o.only != nil && !o.only[m.name] {
				continue
			}
			log.Printf("%s: %s", kind, m.name)
			if err := r.catch(func() { m.run(res) }); err != "" {
				res.errs[m.name] = err
				log.Printf("%s: %s failed: %s", kind, m.name, err)
			}
		}
	})
	if ok != "" {
		res.errs["setup"] = ok
		log.Printf("%s: setup failed: %s", kind, ok)
	}
	return res
}

// row is one line of the ratio table: how to compute it from a result, and the goal the
// issue sets.
type row struct {
	name  string
	goal  string
	group string // the measurement whose failure explains a missing value
	figure
}

// figure is what a row shows: values computed from one round's figures, and the format
// that prints them (one %.Nf verb per value).
type figure struct {
	format string
	values func(f map[string]float64) ([]float64, bool)
}

// ratio prints a / b.
func ratio(a, b string) figure { return ratios(a, b) }

// ratios prints several ratios, a / b of each pair of keys, separated by slashes.
func ratios(keys ...string) figure {
	format := strings.Repeat(" / %.2f", len(keys)/2)[len(" / "):]
	return figure{format, func(f map[string]float64) ([]float64, bool) {
		var vs []float64
		for i := 0; i+1 < len(keys); i += 2 {
			x, ok1 := f[keys[i]]
			y, ok2 := f[keys[i+1]]
			if !ok1 || !ok2 || y == 0 {
				return nil, false
			}
			vs = append(vs, x/y)
		}
		return vs, true
	}}
}

// formatted prints the figures keys with format, when all of them were measured.
func formatted(format string, keys ...string) figure {
	return figure{format, func(f map[string]float64) ([]float64, bool) {
		var vs []float64
		for _, k := range keys {
			v, ok := f[k]
			if !ok {
				return nil, false
			}
			vs = append(vs, v)
		}
		return vs, true
	}}
}

// verb is a format's verb for one value.
var verb = regexp.MustCompile(`%\.\d+f`)

// show prints the values of the rounds that have them: as they are from one round; from
// several, each value as the median of the rounds with their range, "median (min–max)".
func (fg figure) show(rounds []map[string]float64) (string, bool) {
	var each [][]float64
	for _, f := range rounds {
		if vs, ok := fg.values(f); ok {
			each = append(each, vs)
		}
	}
	switch len(each) {
	case 0:
		return "", false
	case 1:
		return fmt.Sprintf(fg.format, anys(each[0])...), true
	}
	i := 0
	return verb.ReplaceAllStringFunc(fg.format, func(v string) string {
		vs := make([]float64, len(each))
		for r := range each {
			vs[r] = each[r][i]
		}
		i++
		slices.Sort(vs)
		med := vs[len(vs)/2]
		if len(vs)%2 == 0 {
			med = (vs[len(vs)/2-1] + med) / 2
		}
		return fmt.Sprintf(v+" ("+v+"–"+v+")", med, vs[0], vs[len(vs)-1])
	}), true
}

func anys(vs []float64) []any {
	out := make([]any, len(vs))
	for i, v := range vs {
		out[i] = v
	}
	return out
}

var ratioRows = []row{
	{"mirror / direct raw ingest, zstd", "≥ 0.8", "throughput", ratio("mirror.zstd", "raw.zstd")},
	{"mirror / direct raw ingest, uncompressed", "≥ 0.8", "throughput", ratio("mirror.none", "raw.none")},
	{"mirror / consumer+producer batching as MirrorMaker 2 (16 KiB), zstd", "≥ 5", "throughput", ratio("mirror.zstd", "copier.zstd")},
	{"mirror / consumer+producer batching as MirrorMaker 2 (16 KiB), uncompressed", "≥ 1.5", "throughput", ratio("mirror.none", "copier.none")},
	{"direct raw ingest / the same copier, zstd / uncompressed (the most a mirror can reach)", "", "throughput", ratios("raw.zstd", "copier.zstd", "raw.none", "copier.none")},
	{"mirror / consumer+producer re-batching up to 1 MB (franz-go's default), zstd / uncompressed", "", "throughput", ratios("mirror.zstd", "rebatcher.zstd", "mirror.none", "rebatcher.none")},
	{"direct raw ingest / the same copier, zstd / uncompressed", "", "throughput", ratios("raw.zstd", "rebatcher.zstd", "raw.none", "rebatcher.none")},
	{"mirror / MirrorMaker 2, zstd", "", "throughput", ratio("mirror.zstd", "mm2.zstd")},
	{"mirror / MirrorMaker 2, uncompressed", "", "throughput", ratio("mirror.none", "mm2.none")},
	{"worker CPU per MiB, zstd (ms)", "≤ 1", "throughput", formatted("%.2f", "cpu.zstd")},
	{"worker CPU per MiB, uncompressed (ms)", "", "throughput", formatted("%.2f", "cpu.none")},
	{"worker CPU from starting the topic to its first offset on the destination, zstd; uncompressed (ms)", "", "throughput", formatted("%.0f; %.0f", "startcpu.zstd", "startcpu.none")},
	{"destination brokers' CPU per MiB: mirrored / direct raw ingest / copied as MirrorMaker 2 batches, zstd; uncompressed (ms)", "", "throughput", formatted("%.2f / %.2f / %.2f; %.2f / %.2f / %.2f", "dstcpu.mirror.zstd", "dstcpu.raw.zstd", "dstcpu.copier.zstd", "dstcpu.mirror.none", "dstcpu.raw.none", "dstcpu.copier.none")},
	{"source brokers' CPU per MiB: mirrored / during the direct raw ingest (not read) / copied, zstd; uncompressed (ms)", "", "throughput", formatted("%.2f / %.2f / %.2f; %.2f / %.2f / %.2f", "srccpu.mirror.zstd", "srccpu.raw.zstd", "srccpu.copier.zstd", "srccpu.mirror.none", "srccpu.raw.none", "srccpu.copier.none")},
	{"one busy + 7 idle partitions: end-to-end p99 (ms)", "< 20", "busy", formatted("%.0f", "busy.p99")},
	{"one partition catching up beside idle ones of its topic (-partitions) / alone, zstd", "", "skewed", ratio("skew.beside", "skew.alone")},
	{"idle partitions: all MIRRORING → lag 0 (s)", "< 5", "idle", formatted("%.1f", "idle.ready")},
	{"idle partitions: all MIRRORING / the destination creating as many partitions until each answers", "", "idle", ratio("idle.ready", "idle.floor")},
	{"idle partitions: new record picked up p50 / p99 / max (ms)", "p99 < 100", "idle", formatted("%.0f / %.0f / %.0f", "idle.p50", "idle.p99", "idle.max")},
	{"compacted topic: offsets per second through holes", "≥ 50,000", "compacted", formatted("%.0f", "compacted.rate")},
	{"compacted topic: mirror / the bench writing its records and markers itself", "", "compacted", ratio("compacted.rate", "direct.holes")},
	{"compacted topic of one partition: the same", "", "compacted", ratio("compacted.one.rate", "direct.holes.one")},
	{"compacted topic: offsets per second / the destination appending lone markers alone", "", "compacted", ratio("compacted.rate", "markers.ceiling")},
	{"head alignment to the log start: time (s)", "< 1", "head", formatted("%.2f", "head.seconds")},
	{"head alignment: time / the destination taking the same offsets from the bench", "", "head", ratio("head.seconds", "head.direct")},
	{"head alignment: worker CPU (ms)", "a tenth of today", "head", formatted("%.0f", "head.cpu")},
}

var figureRows = []row{
	{"mirror, zstd (MiB/s)", "", "throughput", formatted("%.1f", "mirror.zstd")},
	{"direct raw ingest, zstd (MiB/s)", "", "throughput", formatted("%.1f", "raw.zstd")},
	{"consumer+producer batching as MirrorMaker 2 / re-batching up to 1 MB, zstd (MiB/s)", "", "throughput", formatted("%.1f / %.1f", "copier.zstd", "rebatcher.zstd")},
	{"MirrorMaker 2, zstd (MiB/s)", "", "throughput", formatted("%.1f", "mm2.zstd")},
	{"mirror, uncompressed (MiB/s)", "", "throughput", formatted("%.1f", "mirror.none")},
	{"direct raw ingest, uncompressed (MiB/s)", "", "throughput", formatted("%.1f", "raw.none")},
	{"direct raw ingest before / after the mirror, zstd; uncompressed (MiB/s; the figure above is their mean)", "", "throughput", formatted("%.1f / %.1f; %.1f / %.1f", "raw.before.zstd", "raw.after.zstd", "raw.before.none", "raw.after.none")},
	{"consumer+producer batching as MirrorMaker 2 / re-batching up to 1 MB, uncompressed (MiB/s)", "", "throughput", formatted("%.1f / %.1f", "copier.none", "rebatcher.none")},
	{"MirrorMaker 2, uncompressed (MiB/s)", "", "throughput", formatted("%.1f", "mm2.none")},
	{"worker peak resident memory while mirroring, zstd / uncompressed (MiB)", "", "throughput", formatted("%.0f / %.0f", "rss.zstd", "rss.none")},
	{"source log bytes per batch, zstd / uncompressed (KiB)", "", "throughput", formatted("%.0f / %.0f", "batch.zstd", "batch.none")},
	{"mirror: batches per destination produce request, zstd / uncompressed (direct ingest: -partitions)", "", "throughput", formatted("%.1f / %.1f", "perproduce.zstd", "perproduce.none")},
	{"mirror: KiB per source fetch answer, zstd / uncompressed", "", "throughput", formatted("%.0f / %.0f", "perfetch.zstd", "perfetch.none")},
	{"one busy + 7 idle: p50 (ms)", "", "busy", formatted("%.0f", "busy.p50")},
	{"the busy partition read at the source itself: p50 / p99 (ms)", "", "busy", formatted("%.0f / %.0f", "busy.source.p50", "busy.source.p99")},
	{"the same stream through a consumer+producer copier: p50 / p99 (ms)", "", "busy", formatted("%.0f / %.0f", "busy.copier.p50", "busy.copier.p99")},
	{"the same stream written to the destination and read there: p50 / p99 (ms)", "", "busy", formatted("%.0f / %.0f", "busy.destination.p50", "busy.destination.p99")},
	{"one busy + 7 idle: p99 over the first -busy-warm-up on fresh brokers (ms)", "", "busy", formatted("%.0f", "busy.warmup.p99")},
	{"one partition catching up beside idle ones / alone / the destination's direct raw ingest of it, zstd (MiB/s)", "", "skewed", formatted("%.1f / %.1f / %.1f", "skew.beside", "skew.alone", "skew.raw")},
	{"idle partitions: first record right after all MIRRORING on the destination after / seen by a new reader of it after (ms)", "", "idle", formatted("%.0f / %.0f", "idle.first", "idle.first.reader")},
	{"idle pickups not seen within the wait", "", "idle", formatted("%.0f", "idle.missing")},
	{"the destination creating a topic of as many partitions until each answers ListOffsets (s)", "", "idle", formatted("%.1f", "idle.floor")},
	{"compacted topic: offsets / holes", "", "compacted", formatted("%.0f / %.0f", "compacted.offsets", "compacted.holes")},
	{"compacted topic: offsets per second from its creation on the destination (start-up included)", "", "compacted", formatted("%.0f", "compacted.start_rate")},
	{"compacted topic: batches per destination produce request", "", "compacted", formatted("%.1f", "compacted.perproduce")},
	{"compacted topic of one partition: offsets per second through holes", "", "compacted", formatted("%.0f", "compacted.one.rate")},
	{"the bench writing a record and 9 markers in turn itself, -partitions / 1 partition (offsets/s)", "", "compacted", formatted("%.0f / %.0f", "direct.holes", "direct.holes.one")},
	{"one run of holes: offsets per second from the first copied / offsets", "", "compacted", formatted("%.0f / %.0f", "holerun.rate", "holerun.offsets")},
	{"the destination appending lone markers alone, 9 per partition per request (markers/s)", "", "compacted", formatted("%.0f", "markers.ceiling")},
	{"lone markers written with WriteTxnMarkers / with EndTxn (all three topics)", "", "compacted", formatted("%.0f / %.0f", "markers.write_txn_markers", "markers.end_txn")},
	{"head alignment: the destination taking the same offsets from the bench itself (s)", "", "head", formatted("%.2f", "head.direct")},
	{"worker memory per mirrored partition: live heap / RSS (bytes)", "", "memory", formatted("%.0f / %.0f", "memory.heap", "memory.rss")},
}

func printTables(w io.Writer, results []*result) {
	for _, table := range []struct {
		title string
		rows  []row
	}{{"ratios", ratioRows}, {"figures", figureRows}} {
		fmt.Fprintf(w, "\n%s\n", table.title)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		head := "measure"
		for _, r := range results {
			head += "\t" + r.kind
		}
		fmt.Fprintln(tw, head+"\tgoal")
		for _, rw := range table.rows {
			line := rw.name
			for _, r := range results {
				v, ok := rw.show(r.rounds)
				if !ok {
					v = "n/a"
					if r.errs[rw.group] != "" || r.errs["setup"] != "" {
						v = "failed"
					}
				}
				line += "\t" + v
			}
			fmt.Fprintln(tw, line+"\t"+rw.goal)
		}
		tw.Flush()
	}
	for _, r := range results {
		for name, err := range r.errs {
			fmt.Fprintf(w, "%s %s: %s\n", r.kind, name, err)
		}
	}
}
