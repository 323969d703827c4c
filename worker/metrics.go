package main

// Prometheus metrics. Counters and histograms are fed by the engine through the
// datapath.Observer interface (the engine knows no metrics library); partition states
// and lag are read from the engine at scrape time, so they are never stale.
//
//	kafkamirror_partitions{state}                          partitions per KIP state
//	kafkamirror_<state>_partition_state                    the same, one gauge per state, named
//	                                                       after the KIP's <State>PartitionState
//	kafkamirror_partition_lag{mirror,topic,partition}      source HW - destination end offset
//	kafkamirror_max_lag{mirror}                            the KIP's MaxLag, per mirror
//	kafkamirror_mirrored_records_total{mirror,topic}       offsets written to the destination
//	kafkamirror_mirrored_bytes_total{mirror,topic}         bytes written (the KIP's ReplicationBytesIn)
//	kafkamirror_fetch_latency_seconds                      source fetch latency
//	kafkamirror_produce_latency_seconds                    destination produce latency
//	kafkamirror_source_fetches_total{broker}               fetch requests per source broker
//	kafkamirror_source_fetch_partitions_total{broker}      partitions those requests carried
//	kafkamirror_source_fetch_bytes_total{broker}           record bytes they returned
//	kafkamirror_fetch_buffered_bytes{mirror,topic,partition}  fetched bytes waiting to be written
//	kafkamirror_fetch_memory_bytes                         fetched bytes all partitions hold, with
//	                                                       the fetches in flight (fetch_memory_bytes bounds it)
//	kafkamirror_lone_markers_total{method}                 markers written alone (holes), by request:
//	                                                       write_txn_markers (many per request) or
//	                                                       end_txn (one transaction each)
//	kafkamirror_destination_produces_total{broker}         produce requests per destination broker
//	kafkamirror_destination_produce_partitions_total{broker}  partitions (batches) those requests carried
//	kafkamirror_destination_produce_bytes_total{broker}    record batch bytes they carried
//	kafkamirror_partition_failures_total{mirror,topic,retryable}
//	kafkamirror_partition_retries_total{mirror,topic}
//	kafkamirror_partition_session_failures_total{mirror,topic}  data path sessions retried
//	kafkamirror_stalled_partitions                          MIRRORING partitions whose sessions
//	                                                        have failed for the stall threshold
//	kafkamirror_partition_stalled_seconds{mirror,topic,partition}  how long, per stalled partition
//	kafkamirror_state_bad_records{kind}                     unreadable __mirror_state records
//	kafkamirror_group_owned_units{kind}                     units this worker owns in its group
//	kafkamirror_group_members, kafkamirror_group_generation the group as this worker sees it
//	kafkamirror_group_stood_down_total                      units stopped for lost ownership
//	kafkamirror_group_unowned_seconds{kind}                 time without an owner of each unit started here
//
// In a group of several workers the partition state and stalled gauges count the partitions
// this worker runs (sum them over the workers); the lag gauges cover every partition.

import (
	"context"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/datapath"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/metadatasync"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/mirrorengine"
)

// scrapeTimeout bounds the offset requests a scrape makes for the lag gauges.
const scrapeTimeout = 5 * time.Second

// metrics implements datapath.Observer and serves /metrics.
type metrics struct {
	reg               *prometheus.Registry
	records           *prometheus.CounterVec
	bytes             *prometheus.CounterVec
	fetch             prometheus.Histogram
	produce           prometheus.Histogram
	fetches           *prometheus.CounterVec
	fetchedPartitions *prometheus.CounterVec
	fetchedBytes      *prometheus.CounterVec
	buffered          *prometheus.GaugeVec
	loneMarkers       *prometheus.CounterVec
	produces          *prometheus.CounterVec
	producedParts     *prometheus.CounterVec
	producedBytes     *prometheus.CounterVec
	failures          *prometheus.CounterVec
	retries           *prometheus.CounterVec
	sessions          *prometheus.CounterVec
	collector         *engineCollector
}

var _ datapath.Observer = (*metrics)(nil)

func newMetrics(slot *engineSlot, fetchMemory *datapath.FetchMemory, log *slog.Logger) *metrics {
	// Latencies from sub-millisecond (loopback) to tens of seconds (a stalled broker).
	buckets := prometheus.ExponentialBuckets(0.0005, 2.5, 14)
	m := &metrics{
		reg: prometheus.NewRegistry(),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_mirrored_records_total", Help: "Offsets (records, markers and fillers) written to destination partitions.",
		}, []string{"mirror", "topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_mirrored_bytes_total", Help: "Record batch bytes written to destination partitions (the KIP's ReplicationBytesIn).",
		}, []string{"mirror", "topic"}),
		fetch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kafkamirror_fetch_latency_seconds", Help: "Latency of fetch requests to source clusters.", Buckets: buckets,
		}),
		produce: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kafkamirror_produce_latency_seconds", Help: "Latency of produce requests to the destination cluster.", Buckets: buckets,
		}),
		fetches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_source_fetches_total", Help: "Fetch requests to source brokers (one fetcher per broker carries all the partitions it leads).",
		}, []string{"broker"}),
		fetchedPartitions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_source_fetch_partitions_total", Help: "Partitions carried by fetch requests to source brokers.",
		}, []string{"broker"}),
		fetchedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_source_fetch_bytes_total", Help: "Record batch bytes returned by fetch requests to source brokers.",
		}, []string{"broker"}),
		buffered: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "kafkamirror_fetch_buffered_bytes", Help: "Fetched bytes waiting in a partition's fetch-ahead buffer to be written.",
		}, []string{"mirror", "topic", "partition"}),
		loneMarkers: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_lone_markers_total", Help: "Transaction markers written alone (source offsets without a record), by method: write_txn_markers (many per request) or end_txn (one transaction each, when the destination refuses WriteTxnMarkers).",
		}, []string{"method"}),
		produces: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_destination_produces_total", Help: "Produce requests answered by destination brokers (one pipeline per broker groups the partitions it leads).",
		}, []string{"broker"}),
		producedParts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_destination_produce_partitions_total", Help: "Partitions (one batch each) carried by produce requests to destination brokers.",
		}, []string{"broker"}),
		producedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_destination_produce_bytes_total", Help: "Record batch bytes carried by produce requests to destination brokers.",
		}, []string{"broker"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_partition_failures_total", Help: "Partitions entering FAILED.",
		}, []string{"mirror", "topic", "retryable"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_partition_retries_total", Help: "Automatic retries of FAILED partitions.",
		}, []string{"mirror", "topic"}),
		sessions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafkamirror_partition_session_failures_total", Help: "Data path sessions of MIRRORING partitions that failed and were retried (a cluster not answering, a leader move).",
		}, []string{"mirror", "topic"}),
		collector: newEngineCollector(slot, log),
	}
	m.reg.MustRegister(m.records, m.bytes, m.fetch, m.produce, m.fetches, m.fetchedPartitions, m.fetchedBytes, m.buffered, m.loneMarkers, m.produces, m.producedParts, m.producedBytes, m.failures, m.retries, m.sessions, m.collector,
		// go_gc_heap_live_bytes (the heap the last GC kept) measures memory per partition.
		collectors.NewGoCollector(collectors.WithGoCollectorRuntimeMetrics(collectors.GoRuntimeMetricsRule{Matcher: regexp.MustCompile(`^/gc/heap/live:bytes$`)})),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "kafkamirror_fetch_memory_bytes", Help: "Fetched bytes all partitions hold ahead of their writes, with the room taken by fetches in flight (bounded by fetch_memory_bytes).",
		}, func() float64 { return float64(fetchMemory.Used()) }))
	return m
}

func (m *metrics) handler(log *slog.Logger) http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)})
}

// Mirrored implements datapath.Observer.
func (m *metrics) Mirrored(mirror, topic string, _ int32, records, bytes int64) {
	m.records.WithLabelValues(mirror, topic).Add(float64(records))
	m.bytes.WithLabelValues(mirror, topic).Add(float64(bytes))
}

// FetchLatency implements datapath.Observer.
func (m *metrics) FetchLatency(d time.Duration) { m.fetch.Observe(d.Seconds()) }

// ProduceLatency implements datapath.Observer.
func (m *metrics) ProduceLatency(d time.Duration) { m.produce.Observe(d.Seconds()) }

// SourceFetch implements datapath.Observer.
func (m *metrics) SourceFetch(broker int32, partitions int, bytes int64) {
	b := strconv.Itoa(int(broker))
	m.fetches.WithLabelValues(b).Inc()
	m.fetchedPartitions.WithLabelValues(b).Add(float64(partitions))
	m.fetchedBytes.WithLabelValues(b).Add(float64(bytes))
}

// DestinationProduce implements datapath.Observer.
func (m *metrics) DestinationProduce(broker int32, partitions int, bytes int64) {
	b := strconv.Itoa(int(broker))
	m.produces.WithLabelValues(b).Inc()
	m.producedParts.WithLabelValues(b).Add(float64(partitions))
	m.producedBytes.WithLabelValues(b).Add(float64(bytes))
}

// FetchBuffered implements datapath.Observer.
func (m *metrics) FetchBuffered(mirror, topic string, partition int32, bytes int64) {
	m.buffered.WithLabelValues(mirror, topic, strconv.Itoa(int(partition))).Set(float64(bytes))
}

// LoneMarkers implements datapath.Observer.
func (m *metrics) LoneMarkers(method string, markers int64) {
	m.loneMarkers.WithLabelValues(method).Add(float64(markers))
}

// Failed implements datapath.Observer.
func (m *metrics) Failed(mirror, topic string, _ int32, retryable bool) {
	m.failures.WithLabelValues(mirror, topic, strconv.FormatBool(retryable)).Inc()
}

// Retried implements datapath.Observer.
func (m *metrics) Retried(mirror, topic string, _ int32) {
	m.retries.WithLabelValues(mirror, topic).Inc()
}

// SessionStarted implements datapath.Observer; stalls are read from the engine.
func (m *metrics) SessionStarted(string, string, int32) {}

// SessionFailed implements datapath.Observer.
func (m *metrics) SessionFailed(mirror, topic string, _ int32, _ error) {
	m.sessions.WithLabelValues(mirror, topic).Inc()
}

// engineCollector reads states and lag from the engine at scrape time.
type engineCollector struct {
	slot       *engineSlot
	log        *slog.Logger
	partitions *prometheus.Desc
	perState   map[string]*prometheus.Desc
	lag        *prometheus.Desc
	maxLag     *prometheus.Desc
	syncErrors map[string]*prometheus.Desc // by the KIP's sync error gauge name
	stalled    *prometheus.Desc
	stalledFor *prometheus.Desc
	badRecords *prometheus.Desc
}

// statePascal turns "MIRRORING" into "Mirroring", for the KIP's gauge names in help texts.
func statePascal(s string) string { return s[:1] + strings.ToLower(s[1:]) }

func newEngineCollector(slot *engineSlot, log *slog.Logger) *engineCollector {
	c := &engineCollector{
		slot: slot, log: log,
		partitions: prometheus.NewDesc("kafkamirror_partitions", "Mirrored partitions per KIP-1279 partition state.", []string{"state"}, nil),
		perState:   map[string]*prometheus.Desc{},
		lag: prometheus.NewDesc("kafkamirror_partition_lag", "Source high watermark minus destination end offset, per mirrored partition.",
			[]string{"mirror", "topic", "partition"}, nil),
		maxLag: prometheus.NewDesc("kafkamirror_max_lag", "The largest partition lag of a mirror (the KIP's MaxLag).", []string{"mirror"}, nil),
		stalled: prometheus.NewDesc("kafkamirror_stalled_partitions",
			"MIRRORING partitions whose data path sessions have failed for the stall threshold or longer (a cluster they cannot reach).", nil, nil),
		stalledFor: prometheus.NewDesc("kafkamirror_partition_stalled_seconds", "How long a stalled partition's sessions have failed.",
			[]string{"mirror", "topic", "partition"}, nil),
		badRecords: prometheus.NewDesc("kafkamirror_state_bad_records",
			"__mirror_state records that cannot be read; what they describe waits for the operator (kafkamirror-worker state bad-records).", []string{"kind"}, nil),
	}
	for _, s := range api.States {
		c.perState[s] = prometheus.NewDesc("kafkamirror_"+strings.ToLower(s)+"_partition_state",
			"Mirrored partitions in state "+s+" (the KIP's "+statePascal(s)+"PartitionState).", nil, nil)
	}
	c.syncErrors = map[string]*prometheus.Desc{}
	for _, kind := range syncErrorKinds {
		c.syncErrors[kind] = prometheus.NewDesc("kafkamirror_"+snake(kind),
			"1 when the mirror's last metadata sync cycle had a "+kind+" (the KIP's gauge), else 0.", []string{"mirror"}, nil)
	}
	return c
}

// syncErrorKinds are the KIP's MirrorMetadataManager error gauges the engine reports.
var syncErrorKinds = []string{
	metadatasync.ErrorTopicConfig, metadatasync.ErrorConsumerGroupOffset,
	metadatasync.ErrorACL, metadatasync.ErrorTopicMetadata,
}

// snake turns "TopicConfigSyncError" into "topic_config_sync_error".
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Describe implements prometheus.Collector.
func (c *engineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.partitions
	for _, d := range c.perState {
		ch <- d
	}
	ch <- c.lag
	ch <- c.maxLag
	for _, d := range c.syncErrors {
		ch <- d
	}
	ch <- c.stalled
	ch <- c.stalledFor
	ch <- c.badRecords
}

// Collect implements prometheus.Collector. Before the engine is open it reports nothing:
// a zero would claim knowledge the worker does not have yet.
func (c *engineCollector) Collect(ch chan<- prometheus.Metric) {
	e := c.slot.get()
	if e == nil {
		return
	}
	counts := map[string]int{}
	for s, n := range e.PartitionStates() {
		counts[s.String()] += n
	}
	for _, s := range api.States {
		ch <- prometheus.MustNewConstMetric(c.partitions, prometheus.GaugeValue, float64(counts[s]), s)
		ch <- prometheus.MustNewConstMetric(c.perState[s], prometheus.GaugeValue, float64(counts[s]))
	}
	stalled := e.StalledPartitions()
	ch <- prometheus.MustNewConstMetric(c.stalled, prometheus.GaugeValue, float64(len(stalled)))
	for _, p := range stalled {
		ch <- prometheus.MustNewConstMetric(c.stalledFor, prometheus.GaugeValue, time.Since(p.Since).Seconds(), p.Mirror, p.Topic, strconv.Itoa(int(p.Partition)))
	}
	bad := map[string]int{}
	for _, r := range e.BadStateRecords() {
		bad[r.Kind]++
	}
	for _, kind := range mirrorengine.StateRecordKinds {
		ch <- prometheus.MustNewConstMetric(c.badRecords, prometheus.GaugeValue, float64(bad[kind]), kind)
	}
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	for _, m := range e.ListClusterMirrors() {
		for kind, d := range c.syncErrors {
			v := 0.0
			if _, failed := m.SyncStatus.Errors[kind]; failed {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, m.Name)
		}
		topics, err := e.DescribeMirrorTopics(ctx, m.Name)
		if err != nil {
			c.log.Debug("metrics: describing the mirror's topics failed", "mirror", m.Name, "error", err)
			continue
		}
		var maxLag int64
		known := false
		for _, t := range topics {
			for _, p := range t.Partitions {
				if p.SourceOffset < 0 || p.DestinationOffset < 0 || len(p.Unreachable) > 0 {
					continue // unknown or stale lag is left out rather than reported as current
				}
				ch <- prometheus.MustNewConstMetric(c.lag, prometheus.GaugeValue, float64(p.Lag), m.Name, t.Topic, strconv.Itoa(int(p.Partition)))
				maxLag, known = max(maxLag, p.Lag), true
			}
		}
		if known {
			ch <- prometheus.MustNewConstMetric(c.maxLag, prometheus.GaugeValue, float64(maxLag), m.Name)
		}
	}
}
