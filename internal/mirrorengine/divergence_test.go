package mirrorengine

import (
	"errors"
	"fmt"
	"testing"
)

// fakeProbe is a destination compared with its source without clusters: differs says at
// which offsets the two hold different things, data which destination offsets hold data.
type fakeProbe struct {
	differs func(int64) bool
	data    func(int64) bool
	err     error
	asked   []int64 // offsets compared
}

func (p *fakeProbe) same(offset int64) (bool, error) {
	p.asked = append(p.asked, offset)
	return p.differs == nil || !p.differs(offset), p.err
}

func (p *fakeProbe) lastData(from, end int64) (int64, bool, error) {
	for o := end - 1; o >= from; o-- {
		if p.data == nil || p.data(o) {
			return o, true, p.err
		}
	}
	return -1, false, p.err
}

// from is a destination that diverges from offset n on.
func from(n int64) func(int64) bool { return func(o int64) bool { return o >= n } }

func TestJudgeDestination(t *testing.T) {
	for _, tc := range []struct {
		name     string
		src, dst logRange
		differs  func(int64) bool
		data     func(int64) bool
		// want is "" for a destination that may be continued, else the divergence as
		// "from-end" (the offsets that are not the source's).
		want string
	}{
		{name: "first start, empty", src: logRange{0, 100}, dst: logRange{0, 0}},
		{name: "empty, log start moved with the source", src: logRange{400, 1000}, dst: logRange{500, 500}},
		{name: "empty, past the source end", src: logRange{0, 100}, dst: logRange{500, 500}, want: "500-500"},
		{name: "identical", src: logRange{0, 200}, dst: logRange{0, 200}},
		{name: "failed while mirroring: a prefix", src: logRange{0, 300}, dst: logRange{0, 200}},
		{name: "record lost, destination equals the source", src: logRange{0, 200}, dst: logRange{0, 200}, differs: from(200)},
		{name: "written after a failover", src: logRange{0, 300}, dst: logRange{0, 210}, differs: from(200), want: "200-210"},
		{name: "never mirrored", src: logRange{0, 300}, dst: logRange{0, 50}, differs: from(0), want: "0-50"},
		{name: "past the source end, the rest the source's", src: logRange{0, 100}, dst: logRange{0, 120}, differs: from(100), want: "100-120"},
		{name: "past the source end, diverged before it", src: logRange{0, 100}, dst: logRange{0, 120}, differs: from(90), want: "90-120"},
		{name: "past the source end, nothing in common", src: logRange{0, 100}, dst: logRange{150, 160}, want: "150-160"},
		{name: "past an empty source's end", src: logRange{100, 100}, dst: logRange{50, 120}, want: "100-120"},
		{
			// The source has a commit marker where a transaction written after the failover
			// ended: only the last data record tells.
			name: "last marker matches, last data record does not", src: logRange{0, 300}, dst: logRange{0, 210},
			differs: func(o int64) bool { return o >= 200 && o != 209 }, data: func(o int64) bool { return o != 209 },
			want: "200-210",
		},
		{
			// Gap fill ends the destination, then the abort marker of a transaction the
			// failover aborted where the source goes on with its data.
			name: "aborted at the failover", src: logRange{0, 300}, dst: logRange{0, 210},
			differs: func(o int64) bool { return o == 209 }, data: func(o int64) bool { return o < 150 },
			want: "209-210",
		},
		{name: "only the log start differs", src: logRange{0, 300}, dst: logRange{50, 200}, differs: func(o int64) bool { return o == 50 }, want: "50-200"},
		{name: "all of it below the source log start: unverifiable", src: logRange{1000, 1200}, dst: logRange{0, 500}, want: "0-500"},
		{name: "all of it below an empty source's log start", src: logRange{500, 500}, dst: logRange{0, 500}, want: "0-500"},
		{name: "log start below the source's", src: logRange{100, 300}, dst: logRange{0, 200}, differs: func(o int64) bool { return o < 100 }},
		{name: "log start above the source's", src: logRange{0, 300}, dst: logRange{150, 200}, differs: func(o int64) bool { return o < 150 }},
		{name: "one record, the source's", src: logRange{0, 1}, dst: logRange{0, 1}},
		{name: "one record, another", src: logRange{0, 1}, dst: logRange{0, 1}, differs: from(0), want: "0-1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakeProbe{differs: tc.differs, data: tc.data}
			d, err := judgeDestination(tc.src, tc.dst, p)
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if d != nil {
				got = fmt.Sprintf("%d-%d", d.from, d.end)
			}
			if got != tc.want {
				t.Fatalf("divergence %q, want %q (%+v)", got, tc.want, d)
			}
			lo, hi := max(tc.dst.start, tc.src.start), min(tc.dst.end, tc.src.end)
			for _, o := range p.asked {
				if o < lo || o >= hi {
					t.Errorf("compared offset %d, outside what both hold [%d, %d)", o, lo, hi)
				}
			}
			if tc.want == "" && hi > lo && (len(p.asked) == 0 || p.asked[0] != hi-1) {
				t.Errorf("compared %v; the destination's last offset %d first", p.asked, hi-1)
			}
		})
	}
}

func TestJudgeDestinationComparesTheLogStart(t *testing.T) {
	p := &fakeProbe{}
	if d, err := judgeDestination(logRange{0, 300}, logRange{20, 200}, p); d != nil || err != nil {
		t.Fatalf("%v %v", d, err)
	}
	if fmt.Sprint(p.asked) != "[199 20]" {
		t.Fatalf("compared %v, want the last record and the log start", p.asked)
	}
}

func TestJudgeDestinationErrors(t *testing.T) {
	boom := errors.New("boom")
	for _, dst := range []logRange{{0, 50}, {0, 150}} {
		if _, err := judgeDestination(logRange{0, 100}, dst, &fakeProbe{err: boom}); !errors.Is(err, boom) {
			t.Errorf("destination %v: error %v, want the probe's", dst, err)
		}
	}
}

func TestFirstDifference(t *testing.T) {
	for n := int64(0); n < 40; n++ {
		for d := int64(0); d <= n; d++ {
			got, err := firstDifference(0, n, func(o int64) (bool, error) { return o < d, nil })
			if err != nil || got != d {
				t.Fatalf("[0, %d] diverging at %d: got %d, %v", n, d, got, err)
			}
		}
	}
}

func TestDivergenceMessage(t *testing.T) {
	d := &divergence{topic: "t", partition: 2, from: 200, end: 207, reason: "it differs from the source at offset 206"}
	want := "destination t[2] diverged from the source: it differs from the source at offset 206; its 7 records at offsets 200 to 206 are not the source's"
	if d.String() != want || d.records() != 7 {
		t.Fatalf("%q (%d records)", d, d.records())
	}
}
