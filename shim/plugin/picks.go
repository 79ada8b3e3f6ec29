package plugin

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// maxTurnedDown bounds the pods remembered; past it the memory starts afresh
// (a forgotten pod costs at most one more narrowed cycle).
const maxTurnedDown = 4096

// turnedDown remembers the pods whose cycle, narrowed to the sidecar's pick,
// found that node turned down by one of kube-scheduler's filters. Until such a
// pod is reserved, PreFilter ignores any pick for it and lets kube-scheduler
// evaluate every node. The sidecar keeps the same rule; keeping it here too
// means a sidecar that picks the same node again (restarted, or older) cannot
// make PostFilter's immediate requeue a loop. The zero value is ready to use.
type turnedDown struct {
	mu   sync.Mutex
	pods map[types.UID]struct{}
}

func (t *turnedDown) add(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.pods == nil || len(t.pods) >= maxTurnedDown {
		t.pods = map[types.UID]struct{}{}
	}
	t.pods[uid] = struct{}{}
}

func (t *turnedDown) has(uid types.UID) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.pods[uid]
	return ok
}

func (t *turnedDown) forget(uid types.UID) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.pods, uid)
}
