package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/api"
	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/workertest"
)

const (
	benchToken = "bench-token-4c1d7e9a2f"
	mirrorName = "bench"
)

// bench is one cluster kind's source, destination and worker.
type bench struct {
	r        *runner
	o        options
	kind     string
	src, dst *cluster
	sc, dc   *kgo.Client
	sadm     *kadm.Client
	dadm     *kadm.Client
	worker   *workertest.Proc
}

func newBench(r *runner, kind, bin string, o options) *bench {
	b := &bench{r: r, o: o, kind: kind}
	switch kind {
	case "kafka":
		b.src, b.dst = startKafka(r, o.kafkaVersion, o.kafkaBrokers), startKafka(r, o.kafkaVersion, o.kafkaBrokers)
	case "kfake":
		b.src, b.dst = startKfake(r), startKfake(r)
	default:
		r.Fatalf("unknown cluster kind %q (kafka, kfake)", kind)
	}
	b.sc, b.sadm = b.client(b.src)
	b.dc, b.dadm = b.client(b.dst)
	b.warmUp()
	env := workertest.Env(b.dst.addrs, benchToken, "KAFKAMIRROR_LOG_LEVEL="+o.workerLevel)
	if o.fetchMemory > 0 {
		env = append(env, fmt.Sprintf("KAFKAMIRROR_FETCH_MEMORY_BYTES=%d", o.fetchMemory))
	}
	b.worker = workertest.Start(r, bin, env)
	b.worker.WaitReady(r)
	if o.workerLog != "" {
		r.Cleanup(func() {
			if err := os.WriteFile(o.workerLog+"."+kind, []byte(b.worker.Output()), 0o644); err != nil {
				log.Printf("writing the worker's output: %v", err)
			}
		})
	}
	off := api.SyncSettings{Interval: time.Hour.String()} // no metadata sync beside the data path
	_, err := b.worker.Client.CreateMirror(b.ctx(), api.CreateMirrorRequest{
		Name: mirrorName, Source: api.SourceConnection{BootstrapServers: b.src.addrs}, Sync: &off,
	})
	r.check(err, "creating the mirror")
	return b
}

func (b *bench) client(c *cluster, opts ...kgo.Opt) (*kgo.Client, *kadm.Client) {
	cl, err := kgo.NewClient(append([]kgo.Opt{kgo.SeedBrokers(c.addrs...)}, opts...)...)
	b.r.check(err, "client")
	b.r.Cleanup(cl.Close)
	return cl, kadm.NewClient(cl)
}

// requestTimeout bounds one request or command; waits have o.waitLimit.
const requestTimeout = 30 * time.Second

// ctx bounds one request. Its timer releases it; the many short requests of a wait need no
// cancel of their own.
func (b *bench) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), requestTimeout)
	time.AfterFunc(requestTimeout, cancel)
	return ctx
}

// pause stops mirroring topic once it is measured, so that its idle partitions do not take
// part in the next measurement.
func (b *bench) pause(topic string) {
	res, err := b.worker.Client.PauseTopics(b.ctx(), mirrorName, []string{topic})
	b.r.check(err, "pausing "+topic)
	for _, x := range res {
		b.r.check(x.Err(), "pausing "+topic)
	}
	b.waitState(topic, "PAUSED")
}

// replicas is the replication factor of the bench's topics: up to 3 of Apache Kafka's
// brokers, as users run a destination (every produce then waits for its followers).
func (b *bench) replicas() int16 {
	if b.kind != "kafka" {
		return 1
	}
	return int16(min(b.o.kafkaBrokers, 3))
}

func (b *bench) createTopic(adm *kadm.Client, topic string, partitions int, configs map[string]*string) {
	resp, err := adm.CreateTopic(b.ctx(), int32(partitions), b.replicas(), configs, topic)
	if err == nil {
		err = resp.Err
	}
	b.r.check(err, "creating topic "+topic)
	// Real brokers learn of a new topic and its leaders asynchronously.
	c := b.src
	if adm == b.dadm {
		c = b.dst
	}
	deadline := time.Now().Add(requestTimeout)
	for b.endOffsets(c, topic) == nil {
		if time.Now().After(deadline) {
			b.r.Fatalf("topic %s has no leaders after %v", topic, requestTimeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// endOffsets of topic; nil while the topic does not exist everywhere. Raw requests, since
// kadm's retry a missing topic for seconds and a wait must see the first offset at once.
func (b *bench) endOffsets(c *cluster, topic string) map[int32]int64 {
	leaders := b.leaders(c, topic)
	if leaders == nil {
		return nil
	}
	return b.listEnds(c, topic, leaders)
}

// leaders of topic's partitions; nil while the topic does not exist everywhere.
func (b *bench) leaders(c *cluster, topic string) map[int32]int32 {
	mreq := kmsg.NewPtrMetadataRequest()
	mt := kmsg.NewMetadataRequestTopic()
	mt.Topic = kmsg.StringPtr(topic)
	mreq.Topics = append(mreq.Topics, mt)
	resp, err := mreq.RequestWith(b.ctx(), b.clientOf(c))
	if err != nil || len(resp.Topics) != 1 || resp.Topics[0].ErrorCode != 0 {
		return nil
	}
	out := map[int32]int32{}
	for _, p := range resp.Topics[0].Partitions {
		if p.ErrorCode != 0 {
			return nil
		}
		out[p.Partition] = p.Leader
	}
	return out
}

// listEnds asks the leaders for the end offsets of topic; nil on any error (a leader moved).
func (b *bench) listEnds(c *cluster, topic string, leaders map[int32]int32) map[int32]int64 {
	byLeader := map[int32]*kmsg.ListOffsetsRequest{}
	for p, leader := range leaders {
		req := byLeader[leader]
		if req == nil {
			req = kmsg.NewPtrListOffsetsRequest()
			req.ReplicaID = -1
			rt := kmsg.NewListOffsetsRequestTopic()
			rt.Topic = topic
			req.Topics = append(req.Topics, rt)
			byLeader[leader] = req
		}
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
		req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
	}
	out := map[int32]int64{}
	for leader, req := range byLeader {
		lresp, err := req.RequestWith(b.ctx(), b.clientOf(c).Broker(int(leader)))
		if err != nil || len(lresp.Topics) != 1 {
			return nil
		}
		for _, p := range lresp.Topics[0].Partitions {
			if p.ErrorCode != 0 {
				return nil
			}
			out[p.Partition] = p.Offset
		}
	}
	return out
}

func (b *bench) clientOf(c *cluster) *kgo.Client {
	if c == b.dst {
		return b.dc
	}
	return b.sc
}

func sum(m map[int32]int64) (n int64) {
	for _, v := range m {
		n += v
	}
	return n
}

// copyTimes are the moments a watched copy reached: its destination topic existed, its
// first offset was there, its last; and the CPU the processes had used at the first and the
// last, so that CPU per MiB, like throughput, counts no method's start-up.
type copyTimes struct {
	created, first, last time.Time
	cpuFirst, cpuLast    cpuUse
}

// cpuUse is the CPU time the worker and each cluster's processes have used so far.
type cpuUse struct{ worker, src, dst time.Duration }

func (b *bench) cpuUse() cpuUse {
	return cpuUse{b.workerCPU(), b.src.cpu(b.r), b.dst.cpu(b.r)}
}

// cpuPerMiB is the CPU each used per MiB of payload between the copy's first offset and its
// last.
func (t copyTimes) cpuPerMiB(payload int64) (worker, src, dst float64) {
	return perMiB(t.cpuLast.worker-t.cpuFirst.worker, payload), perMiB(t.cpuLast.src-t.cpuFirst.src, payload),
		perMiB(t.cpuLast.dst-t.cpuFirst.dst, payload)
}

// watchCopy polls the destination topic's end offsets until they reach want. It fails the
// measurement when the wait runs out or failed() reports an error (a FAILED partition).
func (b *bench) watchCopy(topic string, want map[int32]int64, failed func() error) copyTimes {
	deadline := time.Now().Add(b.o.waitLimit)
	nextCheck := time.Now()
	var t copyTimes
	var leaders map[int32]int32 // asked once the topic exists: each poll is one request a leader
	for {
		if leaders == nil {
			leaders = b.leaders(b.dst, topic)
		}
		var ends map[int32]int64
		if leaders != nil {
			if ends = b.listEnds(b.dst, topic, leaders); ends == nil {
				leaders = nil
			}
		}
		now := time.Now()
		if t.created.IsZero() && ends != nil {
			t.created = now
		}
		if t.first.IsZero() && sum(ends) > 0 {
			t.first, t.cpuFirst = now, b.cpuUse()
		}
		done := true
		for p, w := range want {
			if ends[p] < w {
				done = false
			}
		}
		if done && ends != nil {
			t.last, t.cpuLast = now, b.cpuUse()
			return t
		}
		if failed != nil && now.After(nextCheck) {
			if err := failed(); err != nil {
				b.r.Fatalf("%s: %v", topic, err)
			}
			nextCheck = now.Add(time.Second)
		}
		if now.After(deadline) {
			b.r.Fatalf("%s: destination at %d of %d offsets after %v", topic, sum(ends), sum(want), b.o.waitLimit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// startMirror starts mirroring topic and returns a check that reports a FAILED partition.
func (b *bench) startMirror(topic string) func() error {
	res, err := b.worker.Client.StartTopics(b.ctx(), mirrorName, []string{topic}, "")
	b.r.check(err, "starting "+topic)
	for _, x := range res {
		b.r.check(x.Err(), "starting "+topic)
	}
	return func() error {
		t, err := b.worker.Client.GetTopic(b.ctx(), mirrorName, topic)
		if err != nil {
			return nil // the API answers again in a moment; the deadline bounds the wait
		}
		for _, p := range t.Partitions {
			if p.State == "FAILED" {
				return fmt.Errorf("partition %d FAILED: %s", p.Partition, p.Error)
			}
		}
		return nil
	}
}

// waitMirroring waits until every partition of topic is MIRRORING.
func (b *bench) waitMirroring(topic string) { b.waitState(topic, "MIRRORING") }

// waitState waits until every partition of topic is in state.
func (b *bench) waitState(topic, state string) {
	deadline := time.Now().Add(b.o.waitLimit)
	lastErr := ""
	for {
		t, err := b.worker.Client.GetTopic(b.ctx(), mirrorName, topic)
		if err == nil && len(t.Partitions) > 0 {
			n := 0
			for _, p := range t.Partitions {
				if p.State == state {
					n++
				}
				if p.State == "FAILED" { // the worker retries; the deadline says when it did not help
					lastErr = fmt.Sprintf("; %s[%d] FAILED: %s", topic, p.Partition, p.Error)
				}
			}
			if n == len(t.Partitions) {
				return
			}
		}
		if time.Now().After(deadline) {
			b.r.Fatalf("%s: not every partition %s after %v%s", topic, state, b.o.waitLimit, lastErr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (b *bench) workerCPU() time.Duration {
	d, err := cpuTime(b.worker.Cmd.Process.Pid)
	b.r.check(err, "worker CPU")
	return d
}

// mibPerSecond is the payload over the time from the copy's first destination offset to its
// last.
func mibPerSecond(payload int64, t copyTimes) float64 {
	return float64(payload) / (1 << 20) / t.last.Sub(t.first).Seconds()
}

// throughputRounds measures throughput -rounds times, each time in a round of its own, so
// each ratio pairs figures of one round: the machine's speed drifts more between rounds than
// within one.
func (b *bench) throughputRounds(res *result) {
	for i := range b.o.rounds {
		if i > 0 {
			res.nextRound()
			log.Printf("%s: throughput round %d of %d", b.kind, i+1, b.o.rounds)
		}
		b.throughput(res)
	}
}

// throughput writes the same load uncompressed and with zstd and copies each with the
// worker, raw produces of its batches, a consumer+producer copier and MirrorMaker 2.
func (b *bench) throughput(res *result) {
	for _, codec := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"zstd", kgo.ZstdCompression()}, {"none", kgo.NoCompression()}} {
		topic := "load-" + codec.name
		if r := res.round(); r > 0 {
			topic += fmt.Sprintf(".round%d", r+1)
		}
		payload := b.writeLoad(topic, codec.codec, b.o.partitions, b.o.partitions)
		want := b.endOffsets(b.src, topic)
		batches := b.fetchRaw(topic, want)
		n, size := 0, 0
		for _, bs := range batches {
			for _, x := range bs {
				n++
				size += len(x)
			}
		}
		res.set("batch."+codec.name, float64(size)/float64(n)/1024)

		// Whatever writes a fresh destination first pays for compiling its produce path
		// (seconds at this size on Apache Kafka: the first of three identical raw ingests took
		// 5.1 s, the others 3.3 and 3.5); brokers in use did that long ago.
		log.Printf("%s: warming the destination up with %s", b.kind, topic)
		b.rawIngest(topic+".warm-up", batches, want)
		// A destination gets cheaper with each ingest for a while yet (JIT, heap sizing): the
		// direct ingest is measured before and after the mirror, and their mean is its figure.
		log.Printf("%s: direct raw ingest %s before the mirror", b.kind, topic)
		before := b.measureIngest(topic+".raw-before", batches, want, payload)

		log.Printf("%s: mirror %s", b.kind, topic)
		pid := b.worker.Cmd.Process.Pid
		b.r.check(resetPeakRSS(pid), "resetting the worker's peak memory")
		produces0, batches0 := b.workerSum("kafkamirror_destination_produces_total"), b.workerSum("kafkamirror_destination_produce_partitions_total")
		fetches0, fetched0 := b.workerSum("kafkamirror_source_fetches_total"), b.workerSum("kafkamirror_source_fetch_bytes_total")
		cpu0 := b.workerCPU() // after the scrapes of /metrics, whose CPU grows with the partitions the worker holds
		failed := b.startMirror(topic)
		t := b.watchCopy(topic, want, failed)
		worker, src, dst := t.cpuPerMiB(payload)
		res.set("cpu."+codec.name, worker)
		res.set("srccpu.mirror."+codec.name, src)
		res.set("dstcpu.mirror."+codec.name, dst)
		res.set("startcpu."+codec.name, float64((t.cpuFirst.worker - cpu0).Milliseconds()))
		res.set("perproduce."+codec.name, (b.workerSum("kafkamirror_destination_produce_partitions_total")-batches0)/
			(b.workerSum("kafkamirror_destination_produces_total")-produces0))
		res.set("perfetch."+codec.name, (b.workerSum("kafkamirror_source_fetch_bytes_total")-fetched0)/
			(b.workerSum("kafkamirror_source_fetches_total")-fetches0)/1024)
		peak, err := peakRSS(pid)
		b.r.check(err, "the worker's peak memory")
		res.set("rss."+codec.name, float64(peak)/(1<<20))
		res.set("mirror."+codec.name, mibPerSecond(payload, t))
		b.pause(topic)

		log.Printf("%s: direct raw ingest %s after the mirror", b.kind, topic)
		after := b.measureIngest(topic+".raw", batches, want, payload)
		res.set("raw.before."+codec.name, before.mibPerSecond)
		res.set("raw.after."+codec.name, after.mibPerSecond)
		res.set("raw."+codec.name, (before.mibPerSecond+after.mibPerSecond)/2)
		res.set("srccpu.raw."+codec.name, (before.srcPerMiB+after.srcPerMiB)/2)
		res.set("dstcpu.raw."+codec.name, (before.dstPerMiB+after.dstPerMiB)/2)

		log.Printf("%s: consumer+producer %s, MirrorMaker 2's producer batches", b.kind, topic)
		t = b.copier(topic, topic+".copy", codec.codec, want, mirrorMakerBatches...)
		_, src, dst = t.cpuPerMiB(payload)
		res.set("copier."+codec.name, mibPerSecond(payload, t))
		res.set("srccpu.copier."+codec.name, src)
		res.set("dstcpu.copier."+codec.name, dst)
		log.Printf("%s: consumer+producer %s, franz-go's producer batches", b.kind, topic)
		res.set("rebatcher."+codec.name, mibPerSecond(payload, b.copier(topic, topic+".rebatched", codec.codec, want)))

		if b.kind == "kafka" && b.o.mm2 {
			log.Printf("%s: MirrorMaker 2 %s", b.kind, topic)
			stop := mirrorMaker(b.r, b.o.mm2Version, b.src, b.dst, topic, codec.name, b.replicas())
			t := b.watchCopy("src."+topic, want, nil)
			stop()
			res.set("mm2."+codec.name, mibPerSecond(payload, t))
		}
		// kfake keeps every log in memory, and a process holding gigabytes ingests at a
		// fraction of its speed (the third round's direct ingest took eight times the first's):
		// only the source and the mirror's copy stay, paused.
		b.deleteTopics(b.dadm, topic+".warm-up", topic+".raw-before", topic+".raw", topic+".copy", topic+".rebatched", "src."+topic)
	}
}

// deleteTopics deletes those of topics that exist.
func (b *bench) deleteTopics(adm *kadm.Client, topics ...string) {
	resp, err := adm.DeleteTopics(b.ctx(), topics...)
	b.r.check(err, "deleting topics")
	for _, r := range resp {
		if r.Err != nil && !errors.Is(r.Err, kerr.UnknownTopicOrPartition) {
			b.r.check(r.Err, "deleting topic "+r.Topic)
		}
	}
}

// ingestMeasure is one direct raw ingest: its speed, and the CPU per MiB of payload the
// source (which it does not read) and the destination used meanwhile.
type ingestMeasure struct{ mibPerSecond, srcPerMiB, dstPerMiB float64 }

func (b *bench) measureIngest(topic string, batches map[int32][][]byte, want map[int32]int64, payload int64) ingestMeasure {
	t := b.rawIngest(topic, batches, want)
	_, src, dst := t.cpuPerMiB(payload)
	return ingestMeasure{mibPerSecond(payload, t), src, dst}
}

// perMiB is CPU time in milliseconds per MiB of payload.
func perMiB(cpu time.Duration, payload int64) float64 {
	return float64(cpu.Milliseconds()) / (float64(payload) / (1 << 20))
}

// writeLoad creates topic with partitions and fills the first written of them with o.mib MiB
// of compressible record values in batches of about o.batchKiB as stored (compressed, for
// zstd); it returns the payload bytes.
func (b *bench) writeLoad(topic string, codec kgo.CompressionCodec, partitions, written int) int64 {
	b.createTopic(b.sadm, topic, partitions, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	words := []string{"order", "customer", "shipped", "pending", "amount", "currency", "EUR", "warehouse", "42", "2026-12-03"}
	value := func() []byte {
		v := make([]byte, 0, b.o.valueBytes+16)
		for len(v) < b.o.valueBytes {
			v = append(v, words[rng.IntN(len(words))]...)
			v = fmt.Appendf(v, " %d ", rng.IntN(100000))
		}
		return v[:b.o.valueBytes]
	}
	// kgo limits batches before compression: scale the limit by the values' zstd ratio so that
	// stored batches have about the same size with both codecs.
	batchBytes := b.o.batchKiB * 1024
	if codec == kgo.ZstdCompression() {
		var sample []byte
		for range 64 {
			sample = append(sample, value()...)
		}
		enc, _ := zstd.NewWriter(nil)
		ratio := float64(len(sample)) / float64(len(enc.EncodeAll(sample, nil)))
		enc.Close()
		batchBytes = min(int(float64(batchBytes)*ratio), 900<<10)
	}
	prod, _ := b.client(b.src, kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(int32(batchBytes)), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(1<<16))
	records := b.o.mib * (1 << 20) / b.o.valueBytes
	var errs atomic.Value
	var wg sync.WaitGroup
	for i := range records {
		wg.Add(1)
		prod.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: int32(i % written), Key: fmt.Appendf(nil, "k%d", i), Value: value()},
			func(_ *kgo.Record, err error) {
				if err != nil {
					errs.Store(err)
				}
				wg.Done()
			})
	}
	wg.Wait()
	if err, _ := errs.Load().(error); err != nil {
		b.r.Fatalf("writing %s: %v", topic, err)
	}
	return int64(records) * int64(b.o.valueBytes)
}

// skewed mirrors one partition's load beside idle partitions of its topic (on the same
// source broker) and alone: a partition catching up must not wait out its idle neighbours'
// long polls each time its fetch-ahead buffer fills. Each is mirrored twice, in turn, and
// the second round counts: whatever mirrors first on fresh brokers pays for warming up
// their paths (a first mirror beside idle partitions ran at 0.7 of the partition alone,
// the same mirrored after it at 1.07). The destination's own ingest of the partition's raw
// batches, measured last, is the ceiling.
func (b *bench) skewed(res *result) {
	var payload int64
	for round := range 2 {
		for _, c := range []struct {
			name       string
			partitions int
		}{{"beside", b.o.partitions}, {"alone", 1}} {
			topic := fmt.Sprintf("skew-%s-%d", c.name, round)
			payload = b.writeLoad(topic, kgo.ZstdCompression(), c.partitions, 1)
			log.Printf("%s: mirror %s", b.kind, topic)
			failed := b.startMirror(topic)
			rate := mibPerSecond(payload, b.watchCopy(topic, b.endOffsets(b.src, topic), failed))
			b.pause(topic)
			if round == 1 {
				res.set("skew."+c.name, rate)
			}
		}
	}
	want := b.endOffsets(b.src, "skew-alone-1") // payload is its load's, the last written
	res.set("skew.raw", mibPerSecond(payload, b.rawIngest("skew.raw", b.fetchRaw("skew-alone-1", want), want)))
}

// fetchRaw reads every batch of topic below want, per partition, with raw Fetch requests.
func (b *bench) fetchRaw(topic string, want map[int32]int64) map[int32][][]byte {
	meta, err := b.sadm.Metadata(b.ctx(), topic)
	b.r.check(err, "metadata")
	td := meta.Topics[topic]
	out := map[int32][][]byte{}
	for p, end := range want {
		leader := b.sc.Broker(int(td.Partitions[p].Leader))
		for off := int64(0); off < end; {
			req := kmsg.NewPtrFetchRequest()
			req.MaxWaitMillis, req.MaxBytes = 100, 32<<20
			rt := kmsg.NewFetchRequestTopic()
			rt.Topic, rt.TopicID = topic, td.ID
			rp := kmsg.NewFetchRequestTopicPartition()
			rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 16<<20
			rt.Partitions = append(rt.Partitions, rp)
			req.Topics = append(req.Topics, rt)
			resp, err := leader.Request(b.ctx(), req)
			b.r.check(err, "raw fetch")
			fr := resp.(*kmsg.FetchResponse)
			if len(fr.Topics) != 1 || len(fr.Topics[0].Partitions) != 1 {
				b.r.Fatalf("raw fetch of %s[%d]: unexpected answer shape", topic, p)
			}
			fp := fr.Topics[0].Partitions[0]
			if fp.ErrorCode != 0 {
				b.r.Fatalf("raw fetch of %s[%d]: error %d", topic, p, fp.ErrorCode)
			}
			for raw := fp.RecordBatches; len(raw) >= 12; {
				n := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
				if n > len(raw) {
					break
				}
				batch := raw[:n]
				raw = raw[n:]
				base := int64(binary.BigEndian.Uint64(batch))
				last := base + int64(int32(binary.BigEndian.Uint32(batch[23:27])))
				if last < off {
					continue
				}
				out[p] = append(out[p], anonymous(batch))
				off = last + 1
			}
		}
	}
	return out
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// anonymous is a copy of batch without producer identity, as a client without idempotence
// would send it: offsets from 0, no producer id, epoch or sequence, a new CRC.
func anonymous(batch []byte) []byte {
	c := append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(c[0:], 0)
	binary.BigEndian.PutUint32(c[12:], 0xffffffff)
	binary.BigEndian.PutUint16(c[21:], binary.BigEndian.Uint16(c[21:])&^0x30) // not transactional, not control
	binary.BigEndian.PutUint64(c[43:], 0xffffffffffffffff)
	binary.BigEndian.PutUint16(c[51:], 0xffff)
	binary.BigEndian.PutUint32(c[53:], 0xffffffff)
	binary.BigEndian.PutUint32(c[17:], crc32.Checksum(c[21:], castagnoli))
	return c
}

// rawIngest is the destination's own ingest speed for these batches: produce requests that
// carry one batch for every partition, several in flight.
func (b *bench) rawIngest(topic string, batches map[int32][][]byte, want map[int32]int64) copyTimes {
	b.createTopic(b.dadm, topic, b.o.partitions, nil)
	meta, err := b.dadm.Metadata(b.ctx(), topic)
	b.r.check(err, "metadata")
	td := meta.Topics[topic]
	var wg sync.WaitGroup
	rounds := make(chan int)
	var failure atomic.Value
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range rounds {
				byLeader := map[int32]*kmsg.ProduceRequest{}
				for p, bs := range batches {
					if i >= len(bs) {
						continue
					}
					leader := td.Partitions[p].Leader
					req := byLeader[leader]
					if req == nil {
						req = kmsg.NewPtrProduceRequest()
						req.Acks, req.TimeoutMillis = -1, 30_000
						rt := kmsg.NewProduceRequestTopic()
						rt.Topic, rt.TopicID = topic, td.ID
						req.Topics = append(req.Topics, rt)
						byLeader[leader] = req
					}
					rp := kmsg.NewProduceRequestTopicPartition()
					rp.Partition, rp.Records = p, bs[i]
					req.Topics[0].Partitions = append(req.Topics[0].Partitions, rp)
				}
				for leader, req := range byLeader {
					resp, err := b.dc.Broker(int(leader)).Request(b.ctx(), req)
					if err == nil {
						for _, rp := range resp.(*kmsg.ProduceResponse).Topics[0].Partitions {
							if rp.ErrorCode != 0 {
								err = fmt.Errorf("partition %d: error %d", rp.Partition, rp.ErrorCode)
							}
						}
					}
					if err != nil {
						failure.Store(err)
					}
				}
			}
		}()
	}
	rounds2 := 0
	for _, bs := range batches {
		rounds2 = max(rounds2, len(bs))
	}
	go func() {
		for i := range rounds2 {
			rounds <- i
		}
		close(rounds)
	}()
	// The answers come back in any order: the destination's offsets only add up to want
	// (per partition, with the same record counts), which is all this measure needs.
	t := b.watchCopy(topic, want, func() error { err, _ := failure.Load().(error); return err })
	wg.Wait()
	return t
}

// mirrorMakerBatches make a kgo producer batch as MirrorMaker 2's does by default (Apache
// Kafka 4's producer: batch.size 16384, linger.ms 5). kgo's own batches are up to 1 MB,
// which the destination appends at a fraction of the CPU per MiB of smaller ones: a copier
// that re-batches so can outrun even the destination's direct ingest of the source's
// batches, which a mirror keeping them offset for offset forwards as they are.
var mirrorMakerBatches = []kgo.Opt{kgo.ProducerBatchMaxBytes(16384), kgo.ProducerLinger(5 * time.Millisecond)}

// copier is the decode-and-re-produce baseline MirrorMaker 2 stands for: a kgo consumer
// feeding a kgo producer (made with prodOpts) that compresses with the source's codec.
func (b *bench) copier(from, to string, codec kgo.CompressionCodec, want map[int32]int64, prodOpts ...kgo.Opt) copyTimes {
	b.createTopic(b.dadm, to, b.o.partitions, nil)
	start := map[string]map[int32]kgo.Offset{from: {}}
	for p := range want {
		start[from][p] = kgo.NewOffset().AtStart()
	}
	cons, _ := b.client(b.src, kgo.ConsumePartitions(start), kgo.FetchMaxBytes(64<<20))
	prod, _ := b.client(b.dst, append([]kgo.Opt{kgo.ProducerBatchCompression(codec), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.MaxBufferedRecords(1 << 16)}, prodOpts...)...)
	var failure atomic.Value
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		total := sum(want)
		for n := int64(0); n < total; {
			fs := cons.PollFetches(ctx)
			if ctx.Err() != nil {
				return
			}
			fs.EachRecord(func(rec *kgo.Record) {
				n++
				prod.Produce(ctx, &kgo.Record{Topic: to, Partition: rec.Partition, Key: rec.Key, Value: rec.Value, Headers: rec.Headers, Timestamp: rec.Timestamp},
					func(_ *kgo.Record, err error) {
						if err != nil {
							failure.Store(err)
						}
					})
			})
		}
	}()
	return b.watchCopy(to, want, func() error { err, _ := failure.Load().(error); return err })
}

// latencies reads records of topic written by stamp on the destination from the given
// offsets and sends each one's delay (now minus the time in its value) to got.
func (b *bench) latencies(ctx context.Context, on *cluster, topic string, from map[int32]int64, got chan<- time.Duration) {
	start := map[string]map[int32]kgo.Offset{topic: {}}
	for p, o := range from {
		start[topic][p] = kgo.NewOffset().At(o)
	}
	cons, _ := b.client(on, kgo.ConsumePartitions(start), kgo.FetchMaxWait(time.Second))
	go func() {
		for ctx.Err() == nil {
			fs := cons.PollFetches(ctx)
			now := time.Now()
			fs.EachRecord(func(rec *kgo.Record) {
				if len(rec.Value) >= 8 {
					got <- now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(rec.Value))))
				}
			})
		}
	}()
}

func stamp() []byte { return binary.BigEndian.AppendUint64(nil, uint64(time.Now().UnixNano())) }

func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := min(len(sorted)-1, int(q*float64(len(sorted))))
	return float64(sorted[i].Microseconds()) / 1000
}

// busyBesideIdle writes a steady stream into one partition while 7 others on the same
// broker stay idle, and measures the stream's end-to-end delay, beside the delay until a
// reader of the source itself sees each record; then the same stream through a
// consumer+producer copier, and written to the destination and read there: a copy adds at
// least the destination's own delay to the source's.
func (b *bench) busyBesideIdle(res *result) {
	const topic = "busy"
	b.createTopic(b.sadm, topic, 8, nil)
	b.startMirror(topic)
	b.waitMirroring(topic)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	got, atSource := make(chan time.Duration, 1<<16), make(chan time.Duration, 1<<16)
	b.latencies(ctx, b.dst, topic, map[int32]int64{0: 0}, got)
	b.latencies(ctx, b.src, topic, map[int32]int64{0: 0}, atSource)
	prod, _ := b.client(b.src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	// An unstamped record first (latencies passes it over), and the stream once it is on the
	// destination: the stream measures a partition being copied, not the writer connecting
	// or the session starting (the idle measurement's first pickup shows that).
	b.r.check(prod.ProduceSync(b.ctx(), &kgo.Record{Topic: topic, Partition: 0}).FirstErr(), "warming up the busy partition's writer")
	b.watchCopy(topic, map[int32]int64{0: 1}, nil)
	// A fresh JVM compiles the brokers' produce and fetch paths in its first seconds, when
	// the source's own readers wait tens of milliseconds too; brokers in use did so long
	// ago. Those seconds are a figure of their own.
	warm := b.stream(prod, topic, b.o.busyWarmUp, got, atSource)
	res.set("busy.warmup.p99", percentile(warm[0], 0.99))
	ds := b.stream(prod, topic, b.o.busyFor, got, atSource)
	res.set("busy.p50", percentile(ds[0], 0.5))
	res.set("busy.p99", percentile(ds[0], 0.99))
	res.set("busy.source.p50", percentile(ds[1], 0.5))
	res.set("busy.source.p99", percentile(ds[1], 0.99))
	b.pause(topic)

	// The consumer+producer copier over the same stream: what a copy that decodes and
	// re-produces each record adds.
	const copied = "busy-copy"
	b.createTopic(b.dadm, copied, 1, nil)
	atCopy := make(chan time.Duration, 1<<16)
	b.latencies(ctx, b.dst, copied, map[int32]int64{0: 0}, atCopy)
	from := map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(b.endOffsets(b.src, topic)[0])}}
	cons, _ := b.client(b.src, kgo.ConsumePartitions(from), kgo.FetchMaxWait(time.Second))
	cprod, _ := b.client(b.dst, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	go func() {
		for ctx.Err() == nil {
			cons.PollFetches(ctx).EachRecord(func(rec *kgo.Record) {
				cprod.Produce(ctx, &kgo.Record{Topic: copied, Partition: 0, Value: rec.Value}, nil)
			})
		}
	}()
	cds := b.stream(prod, topic, b.o.busyFor, atCopy)
	res.set("busy.copier.p50", percentile(cds[0], 0.5))
	res.set("busy.copier.p99", percentile(cds[0], 0.99))

	const direct = "busy-direct"
	b.createTopic(b.dadm, direct, 1, nil)
	atDestination := make(chan time.Duration, 1<<16)
	b.latencies(ctx, b.dst, direct, map[int32]int64{0: 0}, atDestination)
	dprod, _ := b.client(b.dst, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	b.r.check(dprod.ProduceSync(b.ctx(), &kgo.Record{Topic: direct, Partition: 0}).FirstErr(), "warming up the destination's writer")
	dds := b.stream(dprod, direct, b.o.busyFor, atDestination)
	res.set("busy.destination.p50", percentile(dds[0], 0.5))
	res.set("busy.destination.p99", percentile(dds[0], 0.99))
}

// stream writes a stamped record into partition 0 of topic every 2 ms for d and returns,
// for each of readers (fed by latencies), the sorted delays it saw the records with.
func (b *bench) stream(prod *kgo.Client, topic string, d time.Duration, readers ...chan time.Duration) [][]time.Duration {
	sent := 0
	for end := time.Now().Add(d); time.Now().Before(end); sent++ {
		prod.Produce(context.Background(), &kgo.Record{Topic: topic, Partition: 0, Value: stamp()}, nil)
		time.Sleep(2 * time.Millisecond)
	}
	b.r.check(prod.Flush(b.ctx()), "flushing "+topic)
	delays := make([][]time.Duration, len(readers))
	for i, r := range readers {
		delays[i] = b.collect(r, sent)
	}
	return delays
}

// collect waits for n delays (at most o.waitLimit) and returns them sorted.
func (b *bench) collect(got <-chan time.Duration, n int) []time.Duration {
	var ds []time.Duration
	timeout := time.After(b.o.waitLimit)
	for len(ds) < n {
		select {
		case d := <-got:
			ds = append(ds, d)
		case <-timeout:
			b.r.Fatalf("%d of %d records reached the destination within %v", len(ds), n, b.o.waitLimit)
		}
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

const warmUpTopic = "warm-up"

// warmUp pays once what a cluster that has been in use paid long ago, lest the first
// records measured pay it: the destination creates its transaction state topic on the first
// use of a transactional id (~0.5 s on Kafka).
func (b *bench) warmUp() {
	b.createTopic(b.sadm, warmUpTopic, 1, nil)
	b.createTopic(b.dadm, warmUpTopic, 1, nil)
	txn, _ := b.client(b.dst, kgo.TransactionalID("bench-warm-up"))
	b.r.check(txn.BeginTransaction(), "warming up the destination's transactions")
	b.r.check(txn.ProduceSync(b.ctx(), &kgo.Record{Topic: warmUpTopic}).FirstErr(), "warming up the destination's transactions")
	b.r.check(txn.EndTransaction(b.ctx(), kgo.TryAbort), "warming up the destination's transactions")
}

// idlePickup mirrors a topic of many empty partitions, then writes one record into each of
// a few of them and measures how long each takes to reach the destination.
func (b *bench) idlePickup(res *result) {
	const topic = "idle"
	n := b.o.idlePartitions
	b.createTopic(b.sadm, topic, n, nil)
	// The writer connects first: its first request's cost is not the mirror's.
	prod, _ := b.client(b.src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	b.r.check(prod.ProduceSync(b.ctx(), &kgo.Record{Topic: warmUpTopic}).FirstErr(), "warming up the idle partitions' writer")
	// Apache Kafka creates its first topic of many partitions seconds slower than the next.
	b.createTopic(b.dadm, topic+".warm-up", n, nil)
	t0 := time.Now()
	b.startMirror(topic)
	b.waitMirroring(topic)
	res.set("idle.ready", time.Since(t0).Seconds())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	from := map[int32]int64{}
	for p := range n {
		from[int32(p)] = 0
	}
	got := make(chan time.Duration, b.o.samples)
	b.latencies(ctx, b.dst, topic, from, got)
	// The first record, written as soon as every partition is MIRRORING, also waits for the
	// sessions still starting; the samples after it measure partitions that sit idle. It is
	// timed by its partition's end offset on the destination (asked every millisecond), and
	// apart by the reader, whose first fetches of as many partitions take time of their own.
	perm, samples := rand.Perm(n), min(n-1, b.o.samples)
	write := func(p int) {
		b.r.check(prod.ProduceSync(b.ctx(), &kgo.Record{Topic: topic, Partition: int32(p), Value: stamp()}).FirstErr(), "writing an idle partition")
	}
	first := int32(perm[0])
	leader := map[int32]int32{first: b.leaders(b.dst, topic)[first]}
	written := time.Now()
	write(perm[0])
	for deadline := written.Add(b.o.waitLimit); b.listEnds(b.dst, topic, leader)[first] < 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			b.r.Fatalf("the first record written to an idle partition did not reach the destination within %v", b.o.waitLimit)
		}
	}
	res.set("idle.first", float64(time.Since(written).Microseconds())/1000)
	res.set("idle.first.reader", percentile(b.collect(got, 1), 1))
	for _, p := range perm[1:][:samples] {
		write(p)
		time.Sleep(100 * time.Millisecond)
	}
	var ds []time.Duration
	timeout := time.After(b.o.waitLimit)
	for len(ds) < samples {
		select {
		case d := <-got:
			ds = append(ds, d)
			continue
		case <-timeout:
		}
		break
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	res.set("idle.missing", float64(samples-len(ds)))
	res.set("idle.p50", percentile(ds, 0.5))
	res.set("idle.p99", percentile(ds, 0.99))
	res.set("idle.max", percentile(ds, 1))
	b.pause(topic)
	// A mirror's partitions start once the destination answers for them: Apache Kafka
	// creates a new topic's partition logs one after another after CreateTopics answered.
	began := time.Now()
	b.createTopic(b.dadm, topic+".floor", n, nil)
	res.set("idle.floor", time.Since(began).Seconds())
}

// memoryPerPartition mirrors a topic of empty partitions and reads the worker's live heap
// (as its last garbage collection left it) and resident memory before and after: what one
// mirrored partition costs a worker.
func (b *bench) memoryPerPartition(res *result) {
	const topic = "memory"
	n := b.o.memPartitions
	heap0, rss0 := b.workerMemory()
	b.createTopic(b.sadm, topic, n, nil)
	b.startMirror(topic)
	b.waitMirroring(topic)
	heap1, rss1 := b.workerMemory()
	res.set("memory.heap", (heap1-heap0)/float64(n))
	res.set("memory.rss", (rss1-rss0)/float64(n))
	b.pause(topic)
}

// workerMemory waits for the worker's next garbage collection, then reads its live heap and
// resident memory from /metrics.
func (b *bench) workerMemory() (liveHeap, rss float64) {
	gcs := b.workerMetric("go_gc_duration_seconds_count")
	deadline := time.Now().Add(b.o.waitLimit)
	for b.workerMetric("go_gc_duration_seconds_count") == gcs {
		if time.Now().After(deadline) {
			b.r.Fatalf("the worker ran no garbage collection within %v", b.o.waitLimit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return b.workerMetric("go_gc_heap_live_bytes"), b.workerMetric("process_resident_memory_bytes")
}

// workerMetric is the value of an unlabelled metric of the worker's /metrics.
func (b *bench) workerMetric(name string) float64 {
	v, ok := b.workerSeries(name)
	if !ok {
		b.r.Fatalf("the worker's /metrics has no %s", name)
	}
	return v
}

// workerSum is the sum of every series of a metric of the worker's /metrics.
func (b *bench) workerSum(name string) float64 {
	sum := 0.0
	b.scanMetrics(func(line string) {
		series, v, ok := strings.Cut(line, " ")
		if !ok || series != name && !strings.HasPrefix(series, name+"{") {
			return
		}
		f, err := strconv.ParseFloat(v, 64)
		b.r.check(err, "reading "+series)
		sum += f
	})
	return sum
}

// workerSeries is the value of one series of the worker's /metrics (a name with its labels,
// as the worker writes them), and whether it has it.
func (b *bench) workerSeries(series string) (value float64, found bool) {
	b.scanMetrics(func(line string) {
		if v, ok := strings.CutPrefix(line, series+" "); ok && !found {
			f, err := strconv.ParseFloat(v, 64)
			b.r.check(err, "reading "+series)
			value, found = f, true
		}
	})
	return value, found
}

// scanMetrics hands each line of the worker's /metrics to line.
func (b *bench) scanMetrics(line func(string)) {
	resp, err := http.Get(b.worker.URL + "/metrics")
	b.r.check(err, "reading the worker's metrics")
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line(sc.Text())
	}
	b.r.check(sc.Err(), "reading the worker's metrics")
}

// compactedHoles writes compacted topics in which the cleaner removes nine of every ten
// offsets, then mirrors them: every removed offset is a hole the worker fills. The first
// topic has one partition, the second o.partitions (their markers can share requests); a
// third holds one long run of holes (a key overwritten o.holeRun times).
func (b *bench) compactedHoles(res *result) {
	var recs []*kgo.Record
	for i := range b.o.compacted {
		key := fmt.Sprintf("dup-%d", i%50)
		if i%10 == 0 {
			key = fmt.Sprintf("unique-%d", i)
		}
		recs = append(recs, &kgo.Record{Key: []byte(key), Value: []byte("v")})
	}
	// Unmeasured: a fresh Apache Kafka broker compiles its path for markers on the first
	// ones, which a broker in use did long ago (the first of these takes twice as long).
	log.Printf("%s: warming the destination's markers up", b.kind)
	b.directHoles("holes-warm-up", b.o.partitions)
	res.set("markers.ceiling", b.markerCeiling("markers-ceiling", b.o.partitions))
	t, offsets, _ := b.mirrorCompacted("compacted-one", 1, recs)
	res.set("compacted.one.rate", float64(offsets)/t.last.Sub(t.first).Seconds())
	res.set("direct.holes.one", b.directHoles("holes-direct-one", 1))
	res.set("direct.holes", b.directHoles("holes-direct", b.o.partitions))
	produces0, batches0 := b.workerSum("kafkamirror_destination_produces_total"), b.workerSum("kafkamirror_destination_produce_partitions_total")
	t, offsets, holes := b.mirrorCompacted("compacted", int32(b.o.partitions), recs)
	res.set("compacted.perproduce", (b.workerSum("kafkamirror_destination_produce_partitions_total")-batches0)/
		(b.workerSum("kafkamirror_destination_produces_total")-produces0))
	res.set("compacted.offsets", float64(offsets))
	res.set("compacted.holes", float64(holes))
	res.set("compacted.rate", float64(offsets)/t.last.Sub(t.first).Seconds())
	res.set("compacted.start_rate", float64(offsets)/t.last.Sub(t.created).Seconds())

	recs = []*kgo.Record{{Key: []byte("first"), Value: []byte("v")}}
	for range b.o.holeRun {
		recs = append(recs, &kgo.Record{Key: []byte("overwritten"), Value: []byte("v")})
	}
	t, offsets, _ = b.mirrorCompacted("hole-run", 1, recs)
	res.set("holerun.offsets", float64(offsets))
	res.set("holerun.rate", float64(offsets)/t.last.Sub(t.first).Seconds())
	for _, method := range []string{"write_txn_markers", "end_txn"} {
		n, _ := b.workerSeries(`kafkamirror_lone_markers_total{method="` + method + `"}`)
		res.set("markers."+method, n)
	}
}

// directHoles is the baseline of the compacted measurements: the bench itself writes what a
// compacted partition of the measurement becomes on the destination, a keyed record (the
// codec of the source's writer) and then 9 lone abort markers (WriteTxnMarkers),
// o.compacted/10 times, to each partition of a new compacted destination topic at once, each
// request after the answer to the last. It returns offsets per second.
func (b *bench) directHoles(topic string, partitions int) float64 {
	b.createTopic(b.dadm, topic, partitions, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	meta, err := b.dadm.Metadata(b.ctx(), topic)
	b.r.check(err, "metadata")
	prod, _ := b.client(b.dst, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	cycles := b.o.compacted / 10
	writers := make([]func() error, partitions)
	for p := range int32(partitions) {
		markers := kmsg.NewPtrWriteTxnMarkersRequest()
		markers.Markers = slices.Repeat([]kmsg.WriteTxnMarkersRequestMarker{b.abortMarker(topic, p)}, 9)
		leader := b.dc.Broker(int(meta.Topics[topic].Partitions[p].Leader))
		writers[p] = func() error {
			for range cycles {
				if err := prod.ProduceSync(b.ctx(), &kgo.Record{Topic: topic, Partition: p, Key: []byte("unique"), Value: []byte("v")}).FirstErr(); err != nil {
					return err
				}
				resp, err := leader.Request(b.ctx(), markers)
				if err != nil {
					return err
				}
				if code := resp.(*kmsg.WriteTxnMarkersResponse).Markers[0].Topics[0].Partitions[0].ErrorCode; code != 0 {
					return kerr.ErrorForCode(code)
				}
			}
			return nil
		}
	}
	began := time.Now()
	errs := make([]error, partitions)
	var wg sync.WaitGroup
	for p, write := range writers {
		wg.Go(func() { errs[p] = write() })
	}
	wg.Wait()
	b.r.check(errors.Join(errs...), "writing records and markers")
	return float64(partitions*cycles*10) / time.Since(began).Seconds()
}

// abortMarker is a lone abort marker for partition p of a destination topic, with a producer
// id of its own (a transactional id that never opens a transaction), as the worker's.
func (b *bench) abortMarker(topic string, p int32) kmsg.WriteTxnMarkersRequestMarker {
	id := fmt.Sprintf("bench.%s.%d", topic, p)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.TransactionalID, init.TransactionTimeoutMillis = &id, 60_000
	pid, err := init.RequestWith(b.ctx(), b.dc)
	b.r.check(err, "InitProducerId")
	b.r.check(kerr.ErrorForCode(pid.ErrorCode), "InitProducerId")
	mt := kmsg.NewWriteTxnMarkersRequestMarkerTopic()
	mt.Topic, mt.Partitions = topic, []int32{p}
	m := kmsg.NewWriteTxnMarkersRequestMarker()
	m.ProducerID, m.ProducerEpoch, m.Topics = pid.ProducerID, pid.ProducerEpoch, []kmsg.WriteTxnMarkersRequestMarkerTopic{mt}
	return m
}

// markerCeiling is how many lone markers per second the destination appends when the bench
// sends nothing else, one WriteTxnMarkers request at a time with 9 markers for each of
// partitions partitions (each partition its own producer id, as the worker's): the most a
// compacted topic that is nearly all holes can be mirrored at.
func (b *bench) markerCeiling(topic string, partitions int) float64 {
	b.createTopic(b.dadm, topic, partitions, map[string]*string{"cleanup.policy": kadm.StringPtr("compact")})
	meta, err := b.dadm.Metadata(b.ctx(), topic)
	b.r.check(err, "metadata")
	req := kmsg.NewPtrWriteTxnMarkersRequest()
	for p := range int32(partitions) {
		req.Markers = append(req.Markers, slices.Repeat([]kmsg.WriteTxnMarkersRequestMarker{b.abortMarker(topic, p)}, 9)...)
	}
	// The partitions of one leader (all of them on a destination of one broker).
	parts := meta.Topics[topic].Partitions
	req.Markers = slices.DeleteFunc(req.Markers, func(m kmsg.WriteTxnMarkersRequestMarker) bool {
		return parts[m.Topics[0].Partitions[0]].Leader != parts[0].Leader
	})
	leader := b.dc.Broker(int(parts[0].Leader))
	requests := b.o.compacted / 10
	began := time.Now()
	for range requests {
		resp, err := leader.Request(b.ctx(), req)
		b.r.check(err, "writing markers")
		for _, m := range resp.(*kmsg.WriteTxnMarkersResponse).Markers {
			for _, t := range m.Topics {
				for _, p := range t.Partitions {
					b.r.check(kerr.ErrorForCode(p.ErrorCode), "writing markers")
				}
			}
		}
	}
	return float64(requests*len(req.Markers)) / time.Since(began).Seconds()
}

// mirrorCompacted writes recs to each partition of a new compacted topic, has the source's
// cleaner remove what it can, and mirrors the topic; it returns when the copy happened, and
// the offsets and holes copied.
func (b *bench) mirrorCompacted(topic string, partitions int32, recs []*kgo.Record) (t copyTimes, offsets, holes int64) {
	configs := map[string]*string{
		"cleanup.policy":            kadm.StringPtr("compact"),
		"segment.ms":                kadm.StringPtr("100"),
		"min.cleanable.dirty.ratio": kadm.StringPtr("0.01"),
		"delete.retention.ms":       kadm.StringPtr("100"),
	}
	b.createTopic(b.sadm, topic, int(partitions), configs)
	prod, _ := b.client(b.src, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerBatchMaxBytes(16<<10))
	for p := range partitions {
		for _, r := range recs {
			r.Topic, r.Partition = topic, p
		}
		b.r.check(prod.ProduceSync(b.ctx(), recs...).FirstErr(), "writing "+topic)
	}
	live := b.waitCompacted(prod, topic, partitions)
	want := b.endOffsets(b.src, topic)
	// The worker creates the destination topic with the source's configs: with the ones that
	// make the source's cleaner run at once, the destination would roll a segment every
	// 100 ms and clean while the mirror writes (measured: a third of the rate). The
	// baseline's topic is compacted with the broker's defaults, as a user's topic would be.
	var defaults []kadm.AlterConfig
	for name := range configs {
		if name != "cleanup.policy" {
			defaults = append(defaults, kadm.AlterConfig{Op: kadm.DeleteConfig, Name: name})
		}
	}
	altered, err := b.sadm.AlterTopicConfigs(b.ctx(), defaults, topic)
	if err == nil {
		_, err = altered.On(topic, nil)
	}
	b.r.check(err, "restoring the cleaning configs of "+topic)
	t = b.watchCopy(topic, want, b.startMirror(topic))
	b.pause(topic)
	return t, sum(want), sum(want) - live
}

// waitCompacted makes the source's cleaner run until fewer than half the offsets of every
// partition hold a record, and returns the number of records left.
func (b *bench) waitCompacted(prod *kgo.Client, topic string, partitions int32) int64 {
	deadline := time.Now().Add(b.o.waitLimit)
	for {
		// The last batch (kfake) and the active segment (Kafka: segment.ms rolls it at the next
		// record) are never cleaned: a record of its own puts the written ones before them.
		for p := range partitions {
			b.r.check(prod.ProduceSync(b.ctx(), &kgo.Record{Topic: topic, Partition: p, Key: []byte("roll"), Value: []byte("r")}).FirstErr(), "rolling")
		}
		if b.src.compact != nil {
			b.src.compact()
		}
		ends, live, cleaned := b.endOffsets(b.src, topic), int64(0), true
		for p, end := range ends {
			n := b.countRecords(topic, p, end)
			live += n
			cleaned = cleaned && n < end/2
		}
		if cleaned {
			return live
		}
		if time.Now().After(deadline) {
			b.r.Fatalf("the source's cleaner left %d of %d records", live, sum(ends))
		}
		time.Sleep(300 * time.Millisecond)
	}
}

func (b *bench) countRecords(topic string, partition int32, end int64) int64 {
	cons, _ := b.client(b.src, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {partition: kgo.NewOffset().AtStart()}}))
	defer cons.Close()
	var n int64
	for last := int64(-1); last < end-1; {
		fs := cons.PollFetches(b.ctx())
		b.r.check(fs.Err0(), "counting records")
		fs.EachRecord(func(rec *kgo.Record) { n++; last = rec.Offset })
	}
	return n
}

// headAlignment mirrors a topic whose log starts at o.headOffset: the worker must advance
// the empty destination there before the first record. Its baseline is the destination
// taking the same offsets from the bench itself, after it took them once unmeasured: a fresh
// Apache Kafka broker compiles its path for such batches on the first ones (1.7 s against
// 1.0 s for 10,000,000 offsets).
func (b *bench) headAlignment(res *result) {
	const topic = "head"
	b.createTopic(b.sadm, topic, 1, nil)
	b.writeFiller(b.sadm, b.sc, topic)
	b.createTopic(b.dadm, "head.warm-up", 1, nil)
	b.writeFiller(b.dadm, b.dc, "head.warm-up")
	b.createTopic(b.dadm, "head.direct", 1, nil)
	began := time.Now()
	b.writeFiller(b.dadm, b.dc, "head.direct")
	res.set("head.direct", time.Since(began).Seconds())
	var at kadm.Offsets
	at.Add(kadm.Offset{Topic: topic, Partition: 0, At: b.o.headOffset})
	del, err := b.sadm.DeleteRecords(b.ctx(), at)
	b.r.check(err, "DeleteRecords")
	b.r.check(del.Error(), "DeleteRecords")
	prod, _ := b.client(b.src, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	b.r.check(prod.ProduceSync(b.ctx(), &kgo.Record{Topic: topic, Value: []byte("first")}).FirstErr(), "writing after the head")
	want := b.endOffsets(b.src, topic)
	cpu0 := b.workerCPU()
	t := b.watchCopy(topic, want, b.startMirror(topic))
	res.set("head.seconds", t.last.Sub(t.created).Seconds())
	res.set("head.cpu", float64((b.workerCPU() - cpu0).Milliseconds()))
	b.pause(topic)
}

// writeFiller writes o.headOffset empty records to partition 0 of topic, 1,000,000 per
// zstd batch, one request at a time.
func (b *bench) writeFiller(adm *kadm.Client, cl *kgo.Client, topic string) {
	meta, err := adm.Metadata(b.ctx(), topic)
	b.r.check(err, "metadata")
	td := meta.Topics[topic]
	const per = 1_000_000
	full := fillerBatch(per)
	for done := int64(0); done < b.o.headOffset; done += per {
		batch := full
		if n := b.o.headOffset - done; n < per {
			batch = fillerBatch(int(n))
		}
		req := kmsg.NewPtrProduceRequest()
		req.Acks, req.TimeoutMillis = -1, 30_000
		rt := kmsg.NewProduceRequestTopic()
		rt.Topic, rt.TopicID = topic, td.ID
		rp := kmsg.NewProduceRequestTopicPartition()
		rp.Records = batch
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := cl.Broker(int(td.Partitions[0].Leader)).Request(b.ctx(), req)
		b.r.check(err, "writing filler to "+topic)
		if code := resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode; code != 0 {
			b.r.Fatalf("writing filler to %s: %v", topic, kerr.ErrorForCode(code))
		}
	}
}

// fillerBatch is a zstd batch of n empty records, without producer identity.
func fillerBatch(n int) []byte {
	var recs []byte
	for i := range n {
		var body []byte
		body = append(body, 0)             // attributes
		body = kbin.AppendVarlong(body, 0) // timestamp delta
		body = kbin.AppendVarint(body, int32(i))
		body = kbin.AppendVarint(body, -1) // null key
		body = kbin.AppendVarint(body, -1) // null value
		body = kbin.AppendVarint(body, 0)  // no headers
		recs = kbin.AppendVarint(recs, int32(len(body)))
		recs = append(recs, body...)
	}
	enc, _ := zstd.NewWriter(nil)
	defer enc.Close()
	now := time.Now().UnixMilli()
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: 4, LastOffsetDelta: int32(n - 1),
		FirstTimestamp: now, MaxTimestamp: now, ProducerID: -1, ProducerEpoch: -1, FirstSequence: -1,
		NumRecords: int32(n), Records: enc.EncodeAll(recs, nil),
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], castagnoli))
	return raw
}
