package membership

import (
	"cmp"
	"fmt"
	"slices"
	"time"
)

// claim is one member as the leader sees it in a join: what it holds and what it released.
type claim struct {
	ID       string
	Owned    []Unit
	Released []Unit
	Leaving  bool // it gets no units
}

// share is what balance gives one member.
type share struct {
	Owned   []Unit
	Delayed []Unit // the units of Owned that must wait out a previous owner's lease
}

// balance assigns units to members (sorted by ID, at least one). It is pure and
// deterministic, and it is the first of two rounds (see doc.go):
//
//   - a unit held by exactly one member stays with it while that member is within its quota
//     (the quotas are ⌊T/n⌋ or ⌈T/n⌉ units, the larger ones going to the members holding the
//     most, so counts differ by at most one and as few units as possible move);
//   - a unit a member holds beyond its quota, or that two members claim, is withheld: nobody
//     gets it in this generation, and its holder stops it and reports it released, which
//     triggers the second round;
//   - a unit nobody holds goes to the member with the fewest units that is below its quota
//     (ties: member ID), in unit order, so a new topic's partitions spread out; it is Delayed
//     unless a member reported it released or quiet says no lease can cover it (nil: none);
//   - a leaving member gets nothing: what it released goes to the others without delay.
//
// Held units no longer in units are simply not given back: their holders stop them.
func balance(members []claim, units []Unit, quiet func(Unit) bool) map[string]share {
	want := make(map[Unit]struct{}, len(units))
	for _, u := range units {
		want[u] = struct{}{}
	}
	const contested = -1
	holder := make(map[Unit]int, len(want))
	released := map[Unit]struct{}{}
	for i, m := range members {
		for _, u := range m.Owned {
			if _, ok := want[u]; !ok {
				continue
			}
			if _, held := holder[u]; held {
				holder[u] = contested
			} else {
				holder[u] = i
			}
		}
		for _, u := range m.Released {
			released[u] = struct{}{}
		}
	}
	held := make([][]Unit, len(members))
	for u, i := range holder {
		if i != contested {
			held[i] = append(held[i], u)
		}
	}

	// Quotas: the ⌈T/n⌉ places go to the members holding the most; none to a leaving one.
	var order []int
	for i, m := range members {
		if !m.Leaving {
			order = append(order, i)
		}
	}
	n, total := len(order), len(want)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(len(held[b]), len(held[a])) })
	quota := make([]int, len(members))
	for rank, i := range order {
		quota[i] = total / n
		if rank < total%n {
			quota[i]++
		}
	}

	out := make(map[string]share, len(members))
	owned := make([][]Unit, len(members))
	for i := range members {
		// Mirror-level work is kept before partitions: moving a mirror's sync or the commands
		// costs more than moving one partition.
		slices.SortFunc(held[i], func(a, b Unit) int {
			return cmp.Or(cmp.Compare(b.Kind, a.Kind), compareUnits(a, b))
		})
		owned[i] = held[i][:min(len(held[i]), quota[i])]
	}
	free := make([]Unit, 0, total)
	for u := range want {
		if _, ok := holder[u]; !ok {
			free = append(free, u)
		}
	}
	slices.SortFunc(free, compareUnits)
	delayed := make([][]Unit, len(members))
	for _, u := range free {
		best := -1
		for i := range members {
			if len(owned[i]) < quota[i] && (best < 0 || len(owned[i]) < len(owned[best])) {
				best = i
			}
		}
		if best < 0 {
			break // every member is leaving
		}
		owned[best] = append(owned[best], u)
		if _, ok := released[u]; !ok && (quiet == nil || !quiet(u)) {
			delayed[best] = append(delayed[best], u)
		}
	}
	for i, m := range members {
		out[m.ID] = share{Owned: owned[i], Delayed: delayed[i]}
	}
	return out
}

// plan is the leader's whole answer to a join: members' metadata in, assignments out.
// members is the JoinGroup response's list (metadata undecoded); self is the leader's own
// metadata, whose fingerprint rules when no member holds an assignment yet; quiet is
// balance's.
func plan(members []joinedMember, units []Unit, self memberMetadata, quiet func(Unit) bool) map[string]assignment {
	slices.SortFunc(members, func(a, b joinedMember) int { return cmp.Compare(a.ID, b.ID) })
	units = slices.CompactFunc(slices.SortedFunc(slices.Values(units), compareUnits), func(a, b Unit) bool { return a == b })
	out := make(map[string]assignment, len(members))
	// The reference is the configuration of the members already serving (the newest
	// generation held), so a newcomer with another configuration is the one refused, whoever
	// leads.
	ref, refGen := self, int32(-1)
	for _, m := range members {
		if m.err == nil && m.meta.Generation > refGen {
			ref, refGen = m.meta, m.meta.Generation
		}
	}
	var accepted []claim
	var infos []MemberInfo
	for _, m := range members {
		switch {
		case m.err != nil:
			out[m.ID] = assignment{Refused: fmt.Sprintf("the group's leader cannot read this member's metadata (%v): a worker of an incompatible version", m.err)}
		case m.meta.Fingerprint != ref.Fingerprint:
			out[m.ID] = assignment{Refused: fmt.Sprintf("configuration fingerprint %s differs from the group's %s (worker %s, version %s, serving since generation %d): every worker of a destination must share its settings",
				m.meta.Fingerprint, ref.Fingerprint, ref.WorkerID, ref.WorkerVersion, refGen)}
		default:
			accepted = append(accepted, claim{ID: m.ID, Owned: m.meta.Owned, Released: m.meta.Released, Leaving: m.meta.Leaving})
			infos = append(infos, MemberInfo{MemberID: m.ID, WorkerID: m.meta.WorkerID,
				WorkerVersion: m.meta.WorkerVersion, APIAddress: m.meta.APIAddress})
		}
	}
	if len(accepted) == 0 {
		return out
	}
	shares := balance(accepted, units, quiet)
	withheld := int32(len(units))
	for i := range infos {
		owned := shares[infos[i].MemberID].Owned
		infos[i].Units = len(owned)
		withheld -= int32(len(owned))
		for _, u := range owned {
			if u.Kind != KindPartition {
				infos[i].Owned = append(infos[i].Owned, u)
			}
		}
	}
	hash := hashUnits(units)
	for id, s := range shares {
		out[id] = assignment{Owned: s.Owned, Delayed: s.Delayed, Members: infos, UnitsHash: hash, Withheld: withheld}
	}
	return out
}

// joinedMember is one entry of a JoinGroup response as the leader decoded it.
type joinedMember struct {
	ID   string
	meta memberMetadata
	err  error
}

// leadership is what a leader remembers of the generations it assigned one after the other
// (its run), to tell which free units no lease can cover (see doc.go, "Quiet units"). Times
// are the leader's monotonic clock (Member.now).
type leadership struct {
	memberID string
	gen      int32 // the last generation assigned
	since    int64 // when the run's first join answer arrived
	// owned: claimed or given in gen. freed: units owned earlier in the run, with when the
	// first join answer arrived of a generation in which nobody claimed them; dropped once a
	// lease old, when since says as much.
	owned map[Unit]struct{}
	freed map[Unit]int64
}

// begin is called by the leader of generation gen, as member memberID, with the join answer
// that arrived at now. It returns which free units no member can hold a lease on.
func (l *leadership) begin(memberID string, gen int32, now int64, lease time.Duration, members []joinedMember) func(Unit) bool {
	if l.owned == nil || memberID != l.memberID || gen != l.gen+1 {
		// Another leader, or nobody, assigned the generations in between: what they gave
		// is unknown, so the run starts over.
		*l = leadership{memberID: memberID, since: now, owned: map[Unit]struct{}{}, freed: map[Unit]int64{}}
	}
	l.gen = gen
	claimed := map[Unit]struct{}{}
	for _, m := range members {
		if m.err != nil {
			// What an unreadable member holds is unknown: this generation and the next
			// one start over.
			l.owned = nil
			return func(Unit) bool { return false }
		}
		for _, u := range m.meta.Owned { // refused members' too: they may still write
			claimed[u] = struct{}{}
		}
	}
	for u := range l.owned {
		if _, ok := claimed[u]; !ok {
			l.freed[u] = now
		}
	}
	l.owned = claimed
	for u, t := range l.freed {
		if _, ok := claimed[u]; ok || now-t >= int64(lease) {
			delete(l.freed, u)
		}
	}
	return func(u Unit) bool {
		if _, ok := claimed[u]; ok {
			return false
		}
		from, ok := l.freed[u]
		if !ok {
			from = l.since
		}
		return now-from >= int64(lease)
	}
}

// given records what the leader's assignment gave.
func (l *leadership) given(plans map[string]assignment) {
	if l.owned == nil {
		return
	}
	for _, a := range plans {
		for _, u := range a.Owned {
			l.owned[u] = struct{}{}
			delete(l.freed, u)
		}
	}
}
