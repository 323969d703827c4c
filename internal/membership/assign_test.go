package membership

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"testing"
	"time"
)

func p(topic string, partition int32) Unit { return Partition("m", topic, partition) }

func partitions(topic string, n int) []Unit {
	out := make([]Unit, n)
	for i := range out {
		out[i] = p(topic, int32(i))
	}
	return out
}

func TestBalanceTable(t *testing.T) {
	a0, a1, a2, a3 := p("a", 0), p("a", 1), p("a", 2), p("a", 3)
	all := []Unit{a0, a1, a2, a3}
	cases := []struct {
		name    string
		members []claim
		units   []Unit
		want    map[string]share
	}{
		{
			name:    "a group of one takes everything, delayed (nobody released it)",
			members: []claim{{ID: "x"}},
			units:   all,
			want:    map[string]share{"x": {Owned: all, Delayed: all}},
		},
		{
			name:    "fresh units spread one by one",
			members: []claim{{ID: "x"}, {ID: "y"}},
			units:   all,
			want:    map[string]share{"x": {Owned: []Unit{a0, a2}, Delayed: []Unit{a0, a2}}, "y": {Owned: []Unit{a1, a3}, Delayed: []Unit{a1, a3}}},
		},
		{
			name:    "round one: a joiner gets nothing held by another; the holder gives up the excess",
			members: []claim{{ID: "x", Owned: all}, {ID: "y"}},
			units:   all,
			want:    map[string]share{"x": {Owned: []Unit{a0, a1}}, "y": {}},
		},
		{
			name:    "round two: released units move without delay",
			members: []claim{{ID: "x", Owned: []Unit{a0, a1}, Released: []Unit{a2, a3}}, {ID: "y"}},
			units:   all,
			want:    map[string]share{"x": {Owned: []Unit{a0, a1}}, "y": {Owned: []Unit{a2, a3}}},
		},
		{
			name:    "a dead member's units go to the survivors, delayed; nothing else moves",
			members: []claim{{ID: "x", Owned: []Unit{a0}}, {ID: "z", Owned: []Unit{a3}}},
			units:   all,
			want:    map[string]share{"x": {Owned: []Unit{a0, a1}, Delayed: []Unit{a1}}, "z": {Owned: []Unit{a3, a2}, Delayed: []Unit{a2}}},
		},
		{
			name:    "a leaving member gets nothing; what it released moves without delay",
			members: []claim{{ID: "x", Owned: []Unit{a0, a1}}, {ID: "y", Released: []Unit{a2, a3}, Leaving: true}, {ID: "z"}},
			units:   all,
			want:    map[string]share{"x": {Owned: []Unit{a0, a1}}, "y": {}, "z": {Owned: []Unit{a2, a3}}},
		},
		{
			name:    "when every member leaves, nobody gets anything",
			members: []claim{{ID: "x", Released: all, Leaving: true}},
			units:   all,
			want:    map[string]share{"x": {}},
		},
		{
			name:    "a unit claimed twice is withheld from both",
			members: []claim{{ID: "x", Owned: []Unit{a0, a1}}, {ID: "y", Owned: []Unit{a1}}},
			units:   []Unit{a0, a1},
			want:    map[string]share{"x": {Owned: []Unit{a0}}, "y": {}},
		},
		{
			name:    "held units that are no longer wanted are dropped",
			members: []claim{{ID: "x", Owned: []Unit{a0, p("gone", 0)}}},
			units:   []Unit{a0},
			want:    map[string]share{"x": {Owned: []Unit{a0}}},
		},
		{
			name:    "mirror-level work is kept before partitions",
			members: []claim{{ID: "x", Owned: []Unit{a0, a1, Commands(), MirrorSync("m")}}, {ID: "y"}},
			units:   []Unit{a0, a1, Commands(), MirrorSync("m")},
			want:    map[string]share{"x": {Owned: []Unit{Commands(), MirrorSync("m")}}, "y": {}},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := balance(c.members, c.units, nil)
			for id, s := range got {
				if len(s.Owned) == 0 {
					s.Owned = nil
				}
				got[id] = s
			}
			if !reflect.DeepEqual(got, c.want) {
				t.Fatalf("got  %v\nwant %v", got, c.want)
			}
		})
	}
}

// The leader gives a free unit without the handover delay only when no lease can cover it
// (doc.go, "Quiet units"): each case is a run of generations, and the last one's delayed
// units are checked. The lease is 6s; x leads unless a step names another member id.
func TestLeadershipQuietUnits(t *testing.T) {
	const lease = 6 * time.Second
	a0, a1, a2 := p("a", 0), p("a", 1), p("a", 2)
	type gen struct {
		leader string // default "x"
		gen    int32
		at     time.Duration
		claims map[string][]Unit // member → units it holds; every member listed joins
		bad    []string          // members whose metadata cannot be read
		other  []string          // members refused for another configuration
		units  []Unit
	}
	cases := []struct {
		name    string
		gens    []gen
		delayed []Unit
	}{
		{"the first generation of a run delays every unit",
			[]gen{{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}}}, []Unit{a0}},
		{"a new unit less than a lease into the run is delayed", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}},
			{gen: 2, at: lease - time.Millisecond, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}},
		}, []Unit{a1}},
		{"a new unit a lease into the run starts at once", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}},
			{gen: 2, at: lease, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}},
		}, nil},
		{"a unit its holder claimed in the last generation is delayed, however long the run", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil, "y": nil}, units: []Unit{a0, a1}},
			{gen: 2, at: 10 * time.Second, claims: map[string][]Unit{"x": {a0}, "y": {a1}}, units: []Unit{a0, a1}},
			{gen: 3, at: 20 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}}, // y died
		}, []Unit{a1}},
		{"a unit given in the last generation and claimed by nobody is delayed", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil, "y": nil}, units: []Unit{a0, a1}},
			{gen: 2, at: 20 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}},
		}, []Unit{a1}},
		{"a unit without an owner for less than a lease is delayed", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0, a1}},
			{gen: 2, at: 6 * time.Second, claims: map[string][]Unit{"x": {a0, a1}}, units: []Unit{a0}}, // a1 dropped
			{gen: 3, at: 7 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0}},     // and stopped
			{gen: 4, at: 13*time.Second - time.Millisecond, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}},
		}, []Unit{a1}},
		{"a unit without an owner for a lease starts at once", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0, a1}},
			{gen: 2, at: 6 * time.Second, claims: map[string][]Unit{"x": {a0, a1}}, units: []Unit{a0}},
			{gen: 3, at: 7 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0}},
			{gen: 4, at: 13 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}},
		}, nil},
		{"a generation assigned by another leader starts a new run", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}},
			{gen: 3, at: 20 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}},
		}, []Unit{a1}},
		{"a new member id starts a new run", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}},
			{leader: "x2", gen: 2, at: 20 * time.Second, claims: map[string][]Unit{"x2": {a0}}, units: []Unit{a0, a1}},
		}, []Unit{a1}},
		{"an unreadable member delays every unit in its generation", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}},
			{gen: 2, at: 20 * time.Second, claims: map[string][]Unit{"x": {a0}, "b": nil}, bad: []string{"b"}, units: []Unit{a0, a1}},
		}, []Unit{a1}},
		{"an unreadable member starts a new run at the next generation", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}},
			{gen: 2, at: 20 * time.Second, claims: map[string][]Unit{"x": {a0}, "b": nil}, bad: []string{"b"}, units: []Unit{a0}},
			{gen: 3, at: 25 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a2}},
		}, []Unit{a2}},
		{"a refused member's claims count", []gen{
			{gen: 1, claims: map[string][]Unit{"x": nil}, units: []Unit{a0}},
			{gen: 2, at: 20 * time.Second, claims: map[string][]Unit{"x": {a0}, "r": {a1}}, other: []string{"r"}, units: []Unit{a0}},
			{gen: 3, at: 21 * time.Second, claims: map[string][]Unit{"x": {a0}}, units: []Unit{a0, a1}},
		}, []Unit{a1}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var l leadership
			var delayed []Unit
			for _, g := range c.gens {
				leader := cmp.Or(g.leader, "x")
				var members []joinedMember
				for _, id := range slices.Sorted(maps.Keys(g.claims)) {
					j := joinedMember{ID: id, meta: memberMetadata{Fingerprint: "f", Generation: 1, Owned: g.claims[id]}}
					if slices.Contains(g.other, id) {
						j.meta.Fingerprint, j.meta.Generation = "other", -1
					}
					if slices.Contains(g.bad, id) {
						j = joinedMember{ID: id, err: errors.New("unreadable")}
					}
					members = append(members, j)
				}
				quiet := l.begin(leader, g.gen, int64(g.at), lease, members)
				plans := plan(members, g.units, memberMetadata{Fingerprint: "f"}, quiet)
				l.given(plans)
				delayed = nil
				for _, a := range plans {
					delayed = append(delayed, a.Delayed...)
				}
			}
			slices.SortFunc(delayed, compareUnits)
			if !slices.Equal(delayed, c.delayed) {
				t.Fatalf("delayed %v, want %v", delayed, c.delayed)
			}
		})
	}
}

// group simulates members running the protocol against balance: each round, members hold
// what they were given and report released what they lost.
type group struct {
	held     map[string][]Unit
	released map[string][]Unit
}

func (g *group) round(t *testing.T, units []Unit) (moved int) {
	t.Helper()
	ids := slices.Sorted(maps.Keys(g.held))
	var claims []claim
	for _, id := range ids {
		claims = append(claims, claim{ID: id, Owned: g.held[id], Released: g.released[id]})
	}
	shares := balance(claims, units, nil)
	if !reflect.DeepEqual(shares, balance(claims, units, nil)) {
		t.Fatal("balance is not deterministic")
	}
	owner := map[Unit]string{}
	for _, id := range ids {
		for _, u := range shares[id].Owned {
			if prev, dup := owner[u]; dup {
				t.Fatalf("%v given to %s and %s", u, prev, id)
			}
			owner[u] = id
		}
		kept := map[Unit]bool{}
		for _, u := range shares[id].Owned {
			kept[u] = true
		}
		g.released[id] = nil
		for _, u := range g.held[id] {
			if !kept[u] {
				g.released[id] = append(g.released[id], u)
				moved++
			}
		}
		g.held[id] = shares[id].Owned
	}
	return moved
}

func (g *group) check(t *testing.T, units []Unit) {
	t.Helper()
	total, lo, hi := 0, len(units), 0
	for _, h := range g.held {
		total += len(h)
		lo, hi = min(lo, len(h)), max(hi, len(h))
	}
	if total != len(units) || hi-lo > 1 {
		t.Fatalf("%d of %d units assigned, counts between %d and %d", total, len(units), lo, hi)
	}
}

// Members come and go; after each change two rounds settle the group: every unit has one
// owner, counts differ by at most one, and only the units that must move do.
func TestBalanceRoundsSettle(t *testing.T) {
	units := append(partitions("a", 100), partitions("b", 200)...)
	units = append(units, Commands(), MirrorSync("m"))
	g := &group{held: map[string][]Unit{}, released: map[string][]Unit{}}
	steps := []struct {
		join, leave string
		moved       int // the fewest moves between live members that balance allows
	}{
		{join: "w1"},
		{join: "w2", moved: 151}, // 302 units: half leave w1
		{join: "w3", moved: 100}, // 151+151 → 101+101+100
		{leave: "w2"},            // w2's units are free, nobody else's move
		{join: "w4", moved: 100}, // 151+151 → 101+101+100
	}
	for _, s := range steps {
		t.Run(s.join+s.leave, func(t *testing.T) {
			if s.join != "" {
				g.held[s.join] = nil
			}
			if s.leave != "" {
				delete(g.held, s.leave)
				delete(g.released, s.leave)
			}
			moved := g.round(t, units) + g.round(t, units)
			g.check(t, units)
			if moved != s.moved {
				t.Fatalf("%d units moved between live members, %d must", moved, s.moved)
			}
			if again := g.round(t, units); again != 0 {
				t.Fatalf("a settled group moved %d more units", again)
			}
		})
	}
}

func TestPlanRefusesAnotherConfiguration(t *testing.T) {
	serving := memberMetadata{WorkerID: "w1", WorkerVersion: "1.0", Fingerprint: "aaaa", Generation: 7, Owned: []Unit{p("a", 0)}}
	newcomer := memberMetadata{WorkerID: "w2", WorkerVersion: "1.1", Fingerprint: "bbbb", Generation: -1}
	// Whoever leads, the newcomer is refused and the serving member keeps its work.
	for _, self := range []memberMetadata{serving, newcomer} {
		got := plan([]joinedMember{{ID: "m-2", meta: newcomer}, {ID: "m-1", meta: serving}}, []Unit{p("a", 0)}, self, nil)
		want := "configuration fingerprint bbbb differs from the group's aaaa (worker w1, version 1.0, serving since generation 7): every worker of a destination must share its settings"
		if got["m-2"].Refused != want {
			t.Fatalf("refusal %q", got["m-2"].Refused)
		}
		if a := got["m-1"]; a.Refused != "" || !slices.Equal(a.Owned, []Unit{p("a", 0)}) || len(a.Members) != 1 || a.Members[0].WorkerID != "w1" {
			t.Fatalf("serving member's assignment %+v", a)
		}
	}
}

func TestEncodingsRoundTrip(t *testing.T) {
	meta := memberMetadata{WorkerID: "w1", WorkerVersion: "1.2.3", APIAddress: "10.0.0.1:8080", Fingerprint: "ab12",
		Generation: 42, Owned: []Unit{p("b", 3), p("a", 7), Commands(), p("a", 2)}, Released: []Unit{MirrorSync("m2")}, Leaving: true}
	got, err := decodeMemberMetadata(append(meta.encode(), "fields of a later version"...))
	if err != nil {
		t.Fatal(err)
	}
	meta.Owned = []Unit{p("a", 2), p("a", 7), p("b", 3), Commands()}
	if !reflect.DeepEqual(got, meta) {
		t.Fatalf("got %+v\nwant %+v", got, meta)
	}
	a := assignment{Owned: []Unit{p("a", 0), p("a", 1000)}, Delayed: []Unit{p("a", 1000)},
		Members:   []MemberInfo{{MemberID: "m-1", WorkerID: "w1", WorkerVersion: "1", APIAddress: "h:1", Units: 3, Owned: []Unit{Commands()}}},
		UnitsHash: 1 << 63, Withheld: 3}
	if back, err := decodeAssignment(a.encode()); err != nil || !reflect.DeepEqual(back, a) {
		t.Fatalf("assignment %+v %v", back, err)
	}
	if _, err := decodeMemberMetadata([]byte{0, 0, 0}); err == nil {
		t.Fatal("truncated metadata decoded")
	}
	// 10,000 partitions of ten topics fit easily in one record of __consumer_offsets.
	var many []Unit
	for i := range 10 {
		many = append(many, partitions(fmt.Sprintf("orders-%d", i), 1000)...)
	}
	if n := len((&assignment{Owned: many}).encode()); n > 20_000 {
		t.Fatalf("10,000 units encode to %d bytes", n)
	}
}

// The leader's work in one rebalance: a new worker joins the others, which share every
// unit; plan and encode every member's assignment. bytes/group is what the coordinator
// stores for the generation (all assignments), bytes/member the largest assignment.
func BenchmarkAssign(b *testing.B) {
	for _, n := range []int{1_000, 10_000} {
		units := make([]Unit, 0, n)
		for i := range n / 100 {
			units = append(units, partitions(fmt.Sprintf("topic-%d", i), 100)...)
		}
		for _, size := range []int{3, 10} {
			members := make([]joinedMember, size)
			for i := range members {
				members[i] = joinedMember{ID: fmt.Sprintf("w%02d", i+1), meta: memberMetadata{Fingerprint: "f", Generation: 3}}
			}
			members[size-1].meta.Generation = -1
			for i, u := range units {
				members[i%(size-1)].meta.Owned = append(members[i%(size-1)].meta.Owned, u)
			}
			b.Run(fmt.Sprintf("units=%d/members=%d", n, size), func(b *testing.B) {
				var group, largest int
				for b.Loop() {
					group, largest = 0, 0
					for _, a := range plan(members, units, members[0].meta, nil) {
						size := len(a.encode())
						group, largest = group+size, max(largest, size)
					}
				}
				b.ReportMetric(float64(group), "bytes/group")
				b.ReportMetric(float64(largest), "bytes/member")
			})
		}
	}
}
