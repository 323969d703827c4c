package kafkatest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Difference is the first way in which a destination partition differs from
// its source.
type Difference struct {
	Topic       string
	Partition   int32
	Offset      int64  // -1 when not about one offset
	What        string // e.g. "high watermark", "batch kind", "value", "read_committed view"
	Source      string
	Destination string
}

func (d *Difference) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "topic %q", d.Topic)
	if d.Partition >= 0 {
		fmt.Fprintf(&b, " partition %d", d.Partition)
	}
	if d.Offset >= 0 {
		fmt.Fprintf(&b, " offset %d", d.Offset)
	}
	fmt.Fprintf(&b, ": %s: source %s, destination %s", d.What, d.Source, d.Destination)
	return b.String()
}

// ComparePartition compares one partition of topic on two clusters: nil, nil
// when they are identical. The error is for failures to read either side.
func ComparePartition(ctx context.Context, src, dst *kgo.Client, topic string, partition int32) (*Difference, error) {
	return compare(ctx, src, dst, topic, []int32{partition})
}

// CompareTopic compares every partition of topic on two clusters; a
// different partition count (or a topic missing on one side) is a
// Difference.
func CompareTopic(ctx context.Context, src, dst *kgo.Client, topic string) (*Difference, error) {
	return compare(ctx, src, dst, topic, nil)
}

// WaitIdentical polls until CompareTopic reports the topic identical on src
// and dst, and fails the test with the last difference at the deadline.
func WaitIdentical(t TB, src, dst *Cluster, topic string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var lastDiff *Difference
	var lastErr error
	for {
		ctx, cancel := context.WithDeadline(context.Background(), deadline.Add(5*time.Second))
		d, err := CompareTopic(ctx, src.internal, dst.internal, topic)
		cancel()
		if d == nil && err == nil {
			return
		}
		if d != nil {
			lastDiff, lastErr = d, nil
		} else {
			lastErr = err
		}
		if time.Now().After(deadline) {
			var why string
			switch {
			case lastDiff == nil:
				why = fmt.Sprintf("comparison failed: %v", lastErr)
			case lastErr != nil:
				why = fmt.Sprintf("%v (the last comparison failed: %v)", lastDiff, lastErr)
			default:
				why = lastDiff.Error()
			}
			t.Fatalf("kafkatest.WaitIdentical: topic %q on %s and %s not identical after %v: %s", topic, src.ID(), dst.ID(), timeout, why)
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func compare(ctx context.Context, src, dst *kgo.Client, topic string, only []int32) (*Difference, error) {
	var sm, dm topicMeta
	var serr, derr error
	both(func() { sm, serr = describeTopic(ctx, src, topic) }, func() { dm, derr = describeTopic(ctx, dst, topic) })
	if err := errors.Join(side("source", serr), side("destination", derr)); err != nil {
		return nil, err
	}
	if !sm.exists && !dm.exists {
		return nil, fmt.Errorf("topic %q exists on neither cluster", topic)
	}
	partitions := only
	if partitions == nil {
		if len(sm.leaders) != len(dm.leaders) || sm.exists != dm.exists {
			return &Difference{Topic: topic, Partition: -1, Offset: -1, What: "partition count",
				Source: partitionCount(sm), Destination: partitionCount(dm)}, nil
		}
		for p := range sm.leaders {
			partitions = append(partitions, p)
		}
		slices.Sort(partitions)
	}
	for _, p := range partitions {
		_, sok := sm.leaders[p]
		_, dok := dm.leaders[p]
		if !sok || !dok {
			return &Difference{Topic: topic, Partition: p, Offset: -1, What: "partition count",
				Source: partitionCount(sm), Destination: partitionCount(dm)}, nil
		}
	}

	logs := make(map[int32][2]*partLog, len(partitions))
	for _, p := range partitions {
		var sl, dl *partLog
		both(func() { sl, serr = readPartition(ctx, src, topic, sm, p) }, func() { dl, derr = readPartition(ctx, dst, topic, dm, p) })
		if err := errors.Join(side("source", serr), side("destination", derr)); err != nil {
			return nil, fmt.Errorf("topic %q partition %d: %w", topic, p, err)
		}
		if d := compareLogs(topic, p, sl, dl); d != nil {
			return d, nil
		}
		logs[p] = [2]*partLog{sl, dl}
	}

	// The raw logs are identical; now what consumers of each isolation
	// level see, which also covers the brokers' LSO and aborted
	// transaction index.
	type job struct {
		cl        *kgo.Client
		committed bool
		plans     map[int32]viewPlan
		views     map[int32][]viewRecord
		err       error
	}
	jobs := make([]*job, 0, 4)
	for _, committed := range []bool{true, false} {
		for i, cl := range []*kgo.Client{src, dst} {
			plans := make(map[int32]viewPlan, len(partitions))
			for _, p := range partitions {
				plans[p] = planView(logs[p][i], committed)
			}
			jobs = append(jobs, &job{cl: cl, committed: committed, plans: plans})
		}
	}
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.views, j.err = consumeView(ctx, j.cl, topic, j.plans, j.committed)
		}()
	}
	wg.Wait()
	for i, j := range jobs {
		if j.err != nil {
			return nil, fmt.Errorf("%s consumer: %w", []string{"source", "destination"}[i%2], j.err)
		}
	}
	for _, p := range partitions {
		for k, what := range []string{"read_committed view", "read_uncommitted view"} {
			if d := compareViews(topic, p, what, jobs[2*k].views[p], jobs[2*k+1].views[p]); d != nil {
				return d, nil
			}
		}
	}
	return nil, nil
}

func both(a, b func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); a() }()
	b()
	wg.Wait()
}

func side(name string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("%s: %w", name, err)
}

func partitionCount(m topicMeta) string {
	if !m.exists {
		return "no such topic"
	}
	ps := make([]int32, 0, len(m.leaders))
	for p := range m.leaders {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return fmt.Sprintf("%d partitions %v", len(ps), ps)
}

// compareLogs compares two raw partition logs offset by offset.
func compareLogs(topic string, partition int32, s, d *partLog) *Difference {
	diff := func(off int64, what, sv, dv string) *Difference {
		return &Difference{Topic: topic, Partition: partition, Offset: off, What: what, Source: sv, Destination: dv}
	}
	if s.logStart != d.logStart {
		return diff(-1, "log start offset", strconv.FormatInt(s.logStart, 10), strconv.FormatInt(d.logStart, 10))
	}
	if s.hw != d.hw {
		return diff(-1, "high watermark", strconv.FormatInt(s.hw, 10), strconv.FormatInt(d.hw, 10))
	}
	if s.lso != d.lso {
		return diff(-1, "last stable offset", strconv.FormatInt(s.lso, 10), strconv.FormatInt(d.lso, 10))
	}
	i, j := 0, 0
	for i < len(s.entries) || j < len(d.entries) {
		off := int64(math.MaxInt64)
		if i < len(s.entries) {
			off = s.entries[i].offset
		}
		if j < len(d.entries) && d.entries[j].offset < off {
			off = d.entries[j].offset
		}
		var se, de *logEntry
		if i < len(s.entries) && s.entries[i].offset == off {
			se = &s.entries[i]
			i++
		}
		if j < len(d.entries) && d.entries[j].offset == off {
			de = &d.entries[j]
			j++
		}
		switch {
		case se == nil && de.kind == kindAbort && de.lone:
			continue // how the mirror fills a source gap: invisible to every consumer
		case se == nil || de == nil || se.kind != de.kind || se.ctrlType != de.ctrlType:
			return diff(off, "batch kind", describeEntry(se), describeEntry(de))
		}
		// Batch boundaries: a contiguous source batch must arrive as the
		// same batch; a compacted one may arrive as runs inside its range.
		sb, db := s.batches[se.batch], d.batches[de.batch]
		if sb.contiguous() {
			if sb.base != db.base || sb.last != db.last {
				return diff(off, "batch boundaries", sb.String(), db.String())
			}
		} else if db.base < sb.base || db.last > sb.last {
			return diff(off, "batch boundaries", sb.String()+" (compacted)", db.String())
		}
		if se.kind != kindData {
			continue
		}
		switch {
		case !bytesEqual(se.key, de.key):
			return diff(off, "key", renderBytes(se.key), renderBytes(de.key))
		case !bytesEqual(se.value, de.value):
			return diff(off, "value", renderBytes(se.value), renderBytes(de.value))
		case !headersEqual(se.headers, de.headers):
			return diff(off, "headers", renderHeaders(se.headers), renderHeaders(de.headers))
		case se.timestamp != de.timestamp:
			return diff(off, "timestamp", renderTimestamp(se.timestamp), renderTimestamp(de.timestamp))
		case se.txn != de.txn:
			return diff(off, "transactional", strconv.FormatBool(se.txn), strconv.FormatBool(de.txn))
		}
	}
	return nil
}

// bytesEqual tells a null key or value from an empty one, as consumers can.
func bytesEqual(a, b []byte) bool {
	return (a == nil) == (b == nil) && bytes.Equal(a, b)
}

func headersEqual(a, b []kmsg.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !bytesEqual(a[i].Value, b[i].Value) {
			return false
		}
	}
	return true
}

func describeEntry(e *logEntry) string {
	if e == nil {
		return "nothing (a gap)"
	}
	switch e.kind {
	case kindData:
		kind := "data record"
		if e.txn {
			kind = "transactional data record"
		}
		return fmt.Sprintf("%s (key %s, value %s)", kind, renderBytes(e.key), renderBytes(e.value))
	case kindCommit:
		return "commit marker"
	case kindAbort:
		if e.lone {
			return "lone abort marker"
		}
		return "abort marker"
	default:
		return fmt.Sprintf("control record of type %d", e.ctrlType)
	}
}

// renderBytes shows short printable values quoted and anything else as
// hex, so a Difference stays one readable line.
func renderBytes(b []byte) string {
	const limit = 64
	switch {
	case b == nil:
		return "null"
	case utf8.Valid(b) && printable(b):
		if len(b) > limit {
			return fmt.Sprintf("%q… (%d bytes)", b[:limit], len(b))
		}
		return strconv.Quote(string(b))
	case len(b) > limit/2:
		return fmt.Sprintf("0x%x… (%d bytes)", b[:limit/2], len(b))
	default:
		return fmt.Sprintf("0x%x", b)
	}
}

func printable(b []byte) bool {
	for _, r := range string(b) {
		if r < 0x20 || r == 0x7f {
			return false
		}
	}
	return true
}

func renderHeaders(hs []kmsg.Header) string {
	parts := make([]string, len(hs))
	for i, h := range hs {
		parts[i] = strconv.Quote(h.Key) + "=" + renderBytes(h.Value)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func renderTimestamp(ms int64) string {
	return fmt.Sprintf("%d (%s)", ms, time.UnixMilli(ms).UTC().Format("2006-01-02T15:04:05.000Z"))
}

// viewRecord is what a consumer sees of one record.
type viewRecord struct {
	offset    int64
	key       []byte
	value     []byte
	headers   []kmsg.Header
	timestamp int64
}

func (r viewRecord) String() string {
	return fmt.Sprintf("record at offset %d (key %s, value %s, headers %s, timestamp %s)",
		r.offset, renderBytes(r.key), renderBytes(r.value), renderHeaders(r.headers), renderTimestamp(r.timestamp))
}

// viewPlan bounds one partition's consumer: records in [start, end), and the
// last offset it will deliver with control records kept (-1: none), which
// tells when it is done.
type viewPlan struct {
	start, end, target int64
}

func planView(l *partLog, committed bool) viewPlan {
	p := viewPlan{start: l.logStart, end: l.hw, target: -1}
	if committed {
		p.end = l.lso
	}
	for _, e := range l.entries {
		if e.offset >= p.end {
			break
		}
		if committed && e.aborted {
			continue // filtered by a read_committed consumer
		}
		p.target = e.offset
	}
	return p
}

// viewStall is how long a consumer may deliver nothing before its view is
// taken as complete. It only matters when a consumer filters something the
// raw log says it should deliver, which the view comparison then reports.
const viewStall = 2 * time.Second

// consumeView reads each planned partition with a kgo consumer of the given
// isolation level, from the log start to the end offset for that level.
func consumeView(ctx context.Context, cl *kgo.Client, topic string, plans map[int32]viewPlan, committed bool) (map[int32][]viewRecord, error) {
	views := make(map[int32][]viewRecord, len(plans))
	parts := make(map[int32]kgo.Offset)
	for p, plan := range plans {
		if plan.target >= 0 {
			parts[p] = kgo.NewOffset().At(plan.start)
		}
	}
	if len(parts) == 0 {
		return views, nil
	}
	iso := kgo.ReadUncommitted()
	if committed {
		iso = kgo.ReadCommitted()
	}
	opts := append(connectionOpts(cl),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: parts}),
		kgo.FetchIsolationLevel(iso),
		kgo.KeepControlRecords(), // markers mark progress; they are not part of the view
		kgo.FetchMaxWait(100*time.Millisecond),
	)
	ccl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	defer ccl.Close()

	left := len(parts)
	done := make(map[int32]bool)
	lastProgress := time.Now()
	for left > 0 {
		pctx, cancel := context.WithTimeout(ctx, 250*time.Millisecond)
		fs := ccl.PollFetches(pctx)
		cancel()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		var ferr error
		fs.EachError(func(_ string, p int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) && ferr == nil {
				ferr = fmt.Errorf("partition %d: %w", p, err)
			}
		})
		if ferr != nil {
			return nil, ferr
		}
		progressed := false
		fs.EachRecord(func(r *kgo.Record) {
			plan := plans[r.Partition]
			if r.Offset < plan.start || r.Offset >= plan.end {
				return
			}
			progressed = true
			if r.Offset >= plan.target && !done[r.Partition] {
				done[r.Partition] = true
				left--
			}
			if r.Attrs.IsControl() {
				return
			}
			hs := make([]kmsg.Header, len(r.Headers))
			for i, h := range r.Headers {
				hs[i] = kmsg.Header{Key: h.Key, Value: h.Value}
			}
			views[r.Partition] = append(views[r.Partition], viewRecord{
				offset: r.Offset, key: r.Key, value: r.Value, headers: hs, timestamp: r.Timestamp.UnixMilli(),
			})
		})
		if progressed {
			lastProgress = time.Now()
		} else if time.Since(lastProgress) > viewStall {
			break
		}
	}
	return views, nil
}

// connectionOpts keeps how cl connects (brokers, SASL, TLS, dialer, …) and
// drops what it produces or consumes.
func connectionOpts(cl *kgo.Client) []kgo.Opt {
	var out []kgo.Opt
	for _, o := range cl.Opts() {
		switch o.(type) {
		case kgo.ConsumerOpt, kgo.GroupOpt, kgo.ProducerOpt:
			continue
		}
		out = append(out, o)
	}
	return out
}

func compareViews(topic string, partition int32, what string, s, d []viewRecord) *Difference {
	diff := func(off int64, sv, dv string) *Difference {
		return &Difference{Topic: topic, Partition: partition, Offset: off, What: what, Source: sv, Destination: dv}
	}
	for k := 0; k < len(s) || k < len(d); k++ {
		switch {
		case k >= len(s):
			return diff(d[k].offset, fmt.Sprintf("nothing more (%d records)", len(s)), d[k].String())
		case k >= len(d):
			return diff(s[k].offset, s[k].String(), fmt.Sprintf("nothing more (%d records)", len(d)))
		}
		a, b := s[k], d[k]
		if a.offset != b.offset || !bytesEqual(a.key, b.key) || !bytesEqual(a.value, b.value) ||
			!headersEqual(a.headers, b.headers) || a.timestamp != b.timestamp {
			return diff(min(a.offset, b.offset), a.String(), b.String())
		}
	}
	return nil
}
