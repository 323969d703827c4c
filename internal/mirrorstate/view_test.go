package mirrorstate

import "maps"

// LastMirrorsForTopic (tests only) returns a copy of every last-mirror record of topic,
// by mirror name and then partition; an empty (non-nil) map when none.
func (s *Store) LastMirrorsForTopic(topic string) map[string]map[int32]LastMirrorRecord {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make(map[string]map[int32]LastMirrorRecord, len(s.v.lastMirrors[topic]))
	for mirror, ps := range s.v.lastMirrors[topic] {
		out[mirror] = maps.Clone(ps)
	}
	return out
}
