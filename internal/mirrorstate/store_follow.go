package mirrorstate

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// Refresh reads what was appended to the store since the load or the last Refresh (the
// writes of the other workers of a group) and applies it to the view like the load does. A
// record older than the one the view holds for its key (this store's own write, read back)
// changes nothing. It returns the keys whose value changed.
func (s *Store) Refresh(ctx context.Context) ([]RecordKey, error) {
	id, leaders, _, err := describeStoreTopic(ctx, s.cl, s.cfg.Topic, true)
	if err != nil {
		return nil, err
	}
	listed, err := kadm.NewClient(s.cl).ListEndOffsets(ctx, s.cfg.Topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("mirror state store %s: listing end offsets: %w", s.cfg.Topic, err)
	}
	var changed []RecordKey
	for _, p := range slices.Sorted(maps.Keys(leaders)) {
		o, ok := listed.Lookup(s.cfg.Topic, p)
		s.mu.RLock()
		start := s.next[p]
		s.mu.RUnlock()
		if !ok || start >= o.Offset {
			continue
		}
		recs, err := readStorePartition(ctx, s.cl, s.cfg.Topic, id, p, leaders[p], start, o.Offset, s.log)
		if err != nil {
			return changed, err
		}
		changed = append(changed, s.applyRead(p, o.Offset, recs)...)
	}
	return changed, nil
}

// applyRead applies records read from partition p up to end (exclusive).
func (s *Store) applyRead(p int32, end int64, recs map[string]storedRecord) []RecordKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next[p] = max(s.next[p], end)
	var changed []RecordKey
	for _, key := range slices.Sorted(maps.Keys(recs)) {
		rec := recs[key]
		if last, ok := s.offsets[key]; ok && rec.offset <= last {
			continue
		}
		s.offsets[key] = rec.offset
		k, err := ParseKey(key)
		if err != nil {
			continue // not ours to interpret (see loadStore)
		}
		changed = append(changed, k)
		if rec.value == nil {
			s.v.apply(k, nil)
			delete(s.records, key)
			continue
		}
		sr := newStateRecord(k, rec.value, rec.partition, rec.offset)
		val, err := decodeEntry(k, key, rec.value, s.cfg.Sealer, openSecrets)
		if err != nil {
			sr.Problem = err.Error()
			s.v.apply(k, nil)
			s.log.Warn("mirror state store: a record another worker wrote cannot be read", "key", key, "reason", err)
		} else {
			s.v.apply(k, val)
		}
		s.records[key] = sr
	}
	return changed
}
