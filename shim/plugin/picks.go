package plugin

// maxTurnedDown bounds the pods remembered; past it the memory starts afresh
// (a forgotten pod costs at most one more narrowed cycle).
const maxTurnedDown = 4096

// turnedDown remembers the pods whose cycle, narrowed to the sidecar's pick,
// found that node turned down by one of kube-scheduler's filters. Until such a
// pod is reserved, PreFilter ignores any pick for it and lets kube-scheduler
// evaluate every node. The sidecar keeps the same rule; keeping it here too
// means a sidecar that picks the same node again (restarted, or older) cannot
// make PostFilter's immediate requeue a loop. New bounds it by maxTurnedDown.
type turnedDown = uidSet
