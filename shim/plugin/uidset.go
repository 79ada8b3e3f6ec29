package plugin

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// uidSet is a set of pods by UID, safe for concurrent use; the zero value is an
// empty, unbounded set. With max > 0 the set starts afresh when an add would take
// it past max: for memories where a forgotten pod costs little (picks.go).
type uidSet struct {
	max  int
	mu   sync.Mutex
	pods map[types.UID]struct{}
}

// replace makes uids the whole set.
func (s *uidSet) replace(uids []types.UID) {
	pods := make(map[types.UID]struct{}, len(uids))
	for _, uid := range uids {
		pods[uid] = struct{}{}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pods = pods
}

// add puts uids in the set.
func (s *uidSet) add(uids ...types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.pods == nil || (s.max > 0 && len(s.pods)+len(uids) > s.max) {
		s.pods = make(map[types.UID]struct{}, len(uids))
	}
	for _, uid := range uids {
		s.pods[uid] = struct{}{}
	}
}

func (s *uidSet) has(uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pods[uid]
	return ok
}

func (s *uidSet) remove(uid types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.pods, uid)
}

func (s *uidSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.pods)
}
