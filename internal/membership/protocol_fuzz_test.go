package membership

import (
	"bytes"
	"testing"
)

// Member metadata and assignments come from other workers through the coordinator: any bytes
// decode to an error or to a value whose encoding (canonical: units grouped and ordered)
// decodes to the same encoding again — never a panic or an allocation beyond the bytes present.
func FuzzProtocol(f *testing.F) {
	units := []Unit{{Kind: KindPartition, Mirror: "m", Topic: "t", Partition: 3}, {Kind: KindCommands}}
	f.Add((&memberMetadata{WorkerID: "w", WorkerVersion: "v", APIAddress: "http://a", Fingerprint: "f", Generation: 2, Owned: units}).encode())
	f.Add((&assignment{Owned: units, Delayed: units[:1], Members: []MemberInfo{{MemberID: "id", WorkerID: "w", Units: 2, Owned: units}}}).encode())
	f.Add([]byte{0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, raw []byte) {
		if m, err := decodeMemberMetadata(raw); err == nil {
			again, err := decodeMemberMetadata(m.encode())
			if err != nil || !bytes.Equal(again.encode(), m.encode()) {
				t.Fatalf("member metadata %+v does not survive its own encoding: %+v, %v", m, again, err)
			}
		}
		if a, err := decodeAssignment(raw); err == nil {
			again, err := decodeAssignment(a.encode())
			if err != nil || !bytes.Equal(again.encode(), a.encode()) {
				t.Fatalf("assignment %+v does not survive its own encoding: %+v, %v", a, again, err)
			}
		}
	})
}
