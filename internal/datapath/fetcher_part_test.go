package datapath

import (
	"testing"

	"github.com/kafkamirror/terraform-provider-kafkamirror/internal/kafkareq"
)

// A partition's part of a fetch answer is at most half its fetch-ahead buffer, and it is
// fetched again once it has room for a whole part: its writer always has the other half to
// write while the next fetch is in flight, and a busy partition is not fetched in slivers.
func TestFetchPartIsAtMostHalfTheBuffer(t *testing.T) {
	const mib = 1 << 20
	defaults := PartitionConfig{}
	defaults.defaults()
	for _, tc := range []struct {
		name               string
		maxBytes, bufLimit int
		buffered           int
		want               int32 // the part asked for; 0: not fetched
	}{
		{"the defaults, an empty buffer", int(defaults.FetchMaxBytes), defaults.FetchBufferBytes, 0, DefaultFetchBufferBytes / 2},
		{"the defaults, half the buffer written", int(defaults.FetchMaxBytes), defaults.FetchBufferBytes, DefaultFetchBufferBytes / 2, DefaultFetchBufferBytes / 2},
		{"the defaults, less than half the buffer written", int(defaults.FetchMaxBytes), defaults.FetchBufferBytes, DefaultFetchBufferBytes/2 + 1, 0},
		{"parts as big as the buffer: half of it", 4 * mib, 4 * mib, 0, 2 * mib},
		{"parts as big as the buffer, half of it held", 4 * mib, 4 * mib, 2 * mib, 2 * mib},
		{"parts bigger than the buffer, more than half held", 8 * mib, 4 * mib, 2*mib + 1, 0},
		{"small parts", mib, 4 * mib, 3 * mib, mib},
		{"small parts, a full buffer", mib, 4 * mib, 3*mib + 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bf := &brokerFetcher{obs: NopObserver{}, session: map[kafkareq.PartKey]sentPart{}, known: map[kafkareq.PartKey]kafkareq.Fetched{}}
			bf.feeds = append(bf.feeds, &feed{f: bf, topic: "t", meta: kafkareq.TopicMeta{ID: [16]byte{1}}, maxBytes: int32(tc.maxBytes),
				bufLimit: tc.bufLimit, bufBytes: tc.buffered, ready: make(chan struct{}, 1)})
			req, _, _, _ := bf.request()
			var got int32
			if req != nil {
				for _, rt := range req.Topics {
					for _, rp := range rt.Partitions {
						got = rp.PartitionMaxBytes
					}
				}
			}
			if got != tc.want {
				t.Fatalf("the fetch asked for %d bytes of the partition, want %d", got, tc.want)
			}
		})
	}
}
