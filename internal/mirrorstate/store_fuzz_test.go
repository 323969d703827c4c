package mirrorstate

import (
	"reflect"
	"testing"
)

// FuzzStateRecord feeds __mirror_state keys and values to the loader's decoders. Whatever
// decodes must encode and decode again to the same record.
func FuzzStateRecord(f *testing.F) {
	sealer, err := NewSealer(fixtureSecretKey)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, key string, value []byte) {
		k, err := ParseKey(key)
		if err == nil && k.String() != key {
			t.Fatalf("key %q parses to %+v, which is stored as %q", key, k, k.String())
		}
		if err != nil {
			k = RecordKey{Mirror: "m", Topic: "t"} // the loader skips it; the decoders must still cope
		}
		for _, kind := range []Kind{KindMirror, KindTopicConfig, KindPartition, KindLastMirror} {
			k.Kind = kind
			for _, s := range []*Sealer{sealer, nil} {
				for _, mode := range []secretMode{openSecrets, dropSecrets} {
					got, err := decodeEntry(k, key, value, s, mode)
					if err != nil || got == nil {
						continue
					}
					var enc []byte
					switch v := got.(type) {
					case MirrorRecord:
						enc, err = encodeMirror(v, s)
					case TopicConfigRecord:
						enc, err = encodeTopicConfig(v)
					case PartitionRecord:
						enc, err = encodePartition(v)
					case LastMirrorRecord:
						enc, err = encodeLastMirror(v)
					}
					if err != nil {
						t.Fatalf("%T decoded from %q does not encode: %v", got, value, err)
					}
					again, err := decodeEntry(k, key, enc, s, mode)
					if err != nil || !reflect.DeepEqual(again, got) {
						t.Fatalf("%q decodes to\n%+v\nwhich encodes as %q, decoding to\n%+v (%v)", value, got, enc, again, err)
					}
				}
			}
		}
	})
}
