package membership

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

// Kind is what a unit of work is.
type Kind int8

const (
	// KindPartition is one mirrored partition: its runner writes the destination partition.
	KindPartition Kind = iota
	// KindMirrorSync is the metadata sync of one mirror (configs, group offsets, ACLs).
	KindMirrorSync
	// KindCommands is the single owner of commands that change __mirror_state.
	KindCommands
)

func (k Kind) String() string {
	switch k {
	case KindPartition:
		return "partition"
	case KindMirrorSync:
		return "mirror-sync"
	case KindCommands:
		return "commands"
	}
	return fmt.Sprintf("kind(%d)", int8(k))
}

// Unit is one piece of work that exactly one member owns at a time.
type Unit struct {
	Kind      Kind
	Mirror    string // KindPartition, KindMirrorSync
	Topic     string // KindPartition
	Partition int32  // KindPartition
}

// Partition is the unit of one mirrored partition.
func Partition(mirror, topic string, partition int32) Unit {
	return Unit{Kind: KindPartition, Mirror: mirror, Topic: topic, Partition: partition}
}

// MirrorSync is the unit of one mirror's metadata sync.
func MirrorSync(mirror string) Unit { return Unit{Kind: KindMirrorSync, Mirror: mirror} }

// Commands is the unit whose owner applies commands.
func Commands() Unit { return Unit{Kind: KindCommands} }

func (u Unit) String() string {
	switch u.Kind {
	case KindPartition:
		return fmt.Sprintf("%s/%s/%d", u.Mirror, u.Topic, u.Partition)
	case KindMirrorSync:
		return "mirror-sync/" + u.Mirror
	}
	return u.Kind.String()
}

func compareUnits(a, b Unit) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Mirror, b.Mirror),
		cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
}

// sortedUnits returns the set's units in a fixed order.
func sortedUnits(set map[Unit]struct{}) []Unit {
	out := make([]Unit, 0, len(set))
	for u := range set {
		out = append(out, u)
	}
	slices.SortFunc(out, compareUnits)
	return out
}

// appendUnits encodes units compactly: runs of one (kind, mirror, topic) share the names and
// carry their partitions as varint deltas, so 10,000 partitions of a few topics take tens of
// kilobytes. The group coordinator stores every member's assignment in one record of
// __consumer_offsets, which must stay under its max.message.bytes.
func appendUnits(dst []byte, units []Unit) []byte {
	units = slices.SortedFunc(slices.Values(units), compareUnits)
	var runs [][]Unit
	for i, u := range units {
		if i > 0 && u.Kind == units[i-1].Kind && u.Mirror == units[i-1].Mirror && u.Topic == units[i-1].Topic {
			runs[len(runs)-1] = append(runs[len(runs)-1], u)
			continue
		}
		runs = append(runs, []Unit{u})
	}
	dst = kbin.AppendArrayLen(dst, len(runs))
	for _, run := range runs {
		dst = kbin.AppendInt8(dst, int8(run[0].Kind))
		dst = kbin.AppendString(dst, run[0].Mirror)
		dst = kbin.AppendString(dst, run[0].Topic)
		dst = kbin.AppendArrayLen(dst, len(run))
		prev := int32(0)
		for _, u := range run {
			dst = kbin.AppendVarint(dst, u.Partition-prev)
			prev = u.Partition
		}
	}
	return dst
}

func readUnits(r *kbin.Reader) []Unit {
	var out []Unit
	for range max(r.ArrayLen(), 0) {
		kind, mirror, topic := Kind(r.Int8()), r.String(), r.String()
		prev := int32(0)
		for range max(r.ArrayLen(), 0) {
			prev += r.Varint()
			out = append(out, Unit{Kind: kind, Mirror: mirror, Topic: topic, Partition: prev})
		}
		if !r.Ok() {
			return nil
		}
	}
	return out
}

// hashUnits identifies a set of units (in any order, without repeats) by a hash of its
// encoding.
func hashUnits(units []Unit) uint64 {
	h := fnv.New64a()
	h.Write(appendUnits(nil, units))
	return h.Sum64()
}
