package membership

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kbin"
)

const (
	// ProtocolType is the group's protocol type on the coordinator, as Kafka Connect's
	// "connect": consumers and Connect workers that pick the same group name by mistake are
	// refused by the coordinator (INCONSISTENT_GROUP_PROTOCOL) instead of joining.
	ProtocolType = "kafkamirror"
	// ProtocolName names the version of this package's assignment protocol (two-round
	// cooperative, leases and handover delay as in doc.go). A worker speaking another version
	// cannot join a group of this one: the coordinator finds no protocol common to all members.
	ProtocolName = "kafkamirror-v1"

	// metadataVersion and assignmentVersion version the encodings. A reader accepts any
	// version at least its own and ignores the bytes after the fields it knows, so a later
	// version may only append fields.
	metadataVersion   = 0
	assignmentVersion = 0
)

// memberMetadata is what a member says about itself in JoinGroup.
type memberMetadata struct {
	WorkerID      string
	WorkerVersion string
	APIAddress    string
	// Fingerprint of the configuration every member of the group must share.
	Fingerprint string
	// Generation of the assignment the member holds, -1 before its first.
	Generation int32
	// Owned are the units the member holds (running or waiting out a handover). Nobody else
	// is given them in this generation.
	Owned []Unit
	// Released are units the member owned and whose runners it has seen return since its
	// last assignment: they may change hands without a handover delay.
	Released []Unit
	// Leaving says the member is about to leave the group: it takes no units, and hands
	// those it released over without delay.
	Leaving bool
}

func (m *memberMetadata) encode() []byte {
	b := kbin.AppendInt16(nil, metadataVersion)
	b = kbin.AppendString(b, m.WorkerID)
	b = kbin.AppendString(b, m.WorkerVersion)
	b = kbin.AppendString(b, m.APIAddress)
	b = kbin.AppendString(b, m.Fingerprint)
	b = kbin.AppendInt32(b, m.Generation)
	b = appendUnits(b, m.Owned)
	b = appendUnits(b, m.Released)
	return kbin.AppendBool(b, m.Leaving)
}

var errUnreadable = errors.New("unreadable")

func decodeMemberMetadata(raw []byte) (memberMetadata, error) {
	r := kbin.Reader{Src: raw}
	var m memberMetadata
	if v := r.Int16(); v < metadataVersion {
		return m, fmt.Errorf("member metadata version %d: %w", v, errUnreadable)
	}
	m.WorkerID, m.WorkerVersion, m.APIAddress, m.Fingerprint = r.String(), r.String(), r.String(), r.String()
	m.Generation = r.Int32()
	m.Owned = readUnits(&r)
	m.Released = readUnits(&r)
	if len(r.Src) > 0 {
		m.Leaving = r.Bool()
	}
	if !r.Ok() {
		return m, fmt.Errorf("member metadata: %w", errUnreadable)
	}
	return m, nil
}

// MemberInfo describes one member of the group, as every member learns it from its
// assignment.
type MemberInfo struct {
	MemberID      string
	WorkerID      string
	WorkerVersion string
	APIAddress    string
	Units         int // units assigned in this generation
	// Owned are its mirror-level units (Commands, MirrorSync): to find the owner of
	// Commands, and for status. Its partitions are only in its own assignment (Owners reads
	// them), so that the group's assignments grow with the units, not units × members.
	Owned []Unit
}

// Holds reports whether the member was assigned u in this generation.
func (mi MemberInfo) Holds(u Unit) bool { return slices.Contains(mi.Owned, u) }

// assignment is what the leader gives one member in SyncGroup.
type assignment struct {
	// Refused, when not empty, says why the member may not join: it must leave the group.
	Refused string
	Owned   []Unit
	// Delayed are the units of Owned that changed hands without a clean release: the member
	// starts them only after waiting out the previous owner's lease.
	Delayed []Unit
	// Members is the whole group, for status and for forwarding commands.
	Members []MemberInfo
	// UnitsHash identifies the set of units the leader assigned (hashUnits), so that a
	// member can tell whether its own view of the units adds anything.
	UnitsHash uint64
	// Withheld counts the units given to nobody in this generation: a second round follows.
	Withheld int32
}

func (a *assignment) encode() []byte {
	b := kbin.AppendInt16(nil, assignmentVersion)
	b = kbin.AppendString(b, a.Refused)
	b = appendUnits(b, a.Owned)
	b = appendUnits(b, a.Delayed)
	b = kbin.AppendArrayLen(b, len(a.Members))
	for _, m := range a.Members {
		b = kbin.AppendString(b, m.MemberID)
		b = kbin.AppendString(b, m.WorkerID)
		b = kbin.AppendString(b, m.WorkerVersion)
		b = kbin.AppendString(b, m.APIAddress)
		b = kbin.AppendInt32(b, int32(m.Units))
	}
	// Appended after the fields of the first encoding, for status: each member's units.
	for _, m := range a.Members {
		b = appendUnits(b, m.Owned)
	}
	b = kbin.AppendInt64(b, int64(a.UnitsHash))
	return kbin.AppendInt32(b, a.Withheld)
}

func decodeAssignment(raw []byte) (assignment, error) {
	r := kbin.Reader{Src: raw}
	var a assignment
	if v := r.Int16(); v < assignmentVersion {
		return a, fmt.Errorf("assignment version %d: %w", v, errUnreadable)
	}
	a.Refused = r.String()
	a.Owned = readUnits(&r)
	a.Delayed = readUnits(&r)
	for range max(r.ArrayLen(), 0) {
		a.Members = append(a.Members, MemberInfo{MemberID: r.String(), WorkerID: r.String(),
			WorkerVersion: r.String(), APIAddress: r.String(), Units: int(r.Int32())})
	}
	for i := range a.Members {
		if len(r.Src) == 0 {
			break // a leader that does not send them
		}
		a.Members[i].Owned = readUnits(&r)
	}
	if len(r.Src) > 0 {
		a.UnitsHash, a.Withheld = uint64(r.Int64()), r.Int32()
	}
	if !r.Ok() {
		return a, fmt.Errorf("assignment: %w", errUnreadable)
	}
	return a, nil
}
