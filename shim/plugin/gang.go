package plugin

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"
)

// GroupNameAnnotation names a pod's PodGroup (Volcano's and scheduler-plugins' key).
const GroupNameAnnotation = "scheduling.k8s.io/group-name"

// gangOf is the PodGroup key "namespace/name" of a pod, or "" when it has none.
func gangOf(pod *v1.Pod) string {
	name := pod.Annotations[GroupNameAnnotation]
	if name == "" {
		return ""
	}
	return pod.Namespace + "/" + name
}

// waitingPods is the part of the framework handle the Permit barrier uses: the
// pods kube-scheduler holds in Permit. fwk.Handle satisfies it; tests fake it.
type waitingPods interface {
	IterateOverWaitingPods(callback func(fwk.WaitingPod))
	GetWaitingPod(uid types.UID) fwk.WaitingPod
}

// waitingMembers lists the UIDs of the pods of `gang` waiting in Permit, except `self`.
func waitingMembers(h waitingPods, gang string, self types.UID) []string {
	var uids []string
	h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		pod := wp.GetPod()
		if pod.UID != self && gangOf(pod) == gang {
			uids = append(uids, string(pod.UID))
		}
	})
	return uids
}

// allowGang lets every waiting member of `gang` go on to bind; returns how many.
// Pods are collected first and allowed after the iteration, so Allow never runs
// under the waiting-pods map's lock.
func allowGang(h waitingPods, gang, plugin string) int {
	var members []types.UID
	h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if gangOf(wp.GetPod()) == gang {
			members = append(members, wp.GetPod().UID)
		}
	})
	allowed := 0
	for _, uid := range members {
		if wp := h.GetWaitingPod(uid); wp != nil {
			wp.Allow(plugin)
			allowed++
		}
	}
	return allowed
}

// rejectGang rejects every waiting member of `gang` (each is then unreserved by
// the framework), so no member binds without the rest; returns how many.
func rejectGang(h waitingPods, gang, plugin, msg string) int {
	var members []types.UID
	h.IterateOverWaitingPods(func(wp fwk.WaitingPod) {
		if gangOf(wp.GetPod()) == gang {
			members = append(members, wp.GetPod().UID)
		}
	})
	rejected := 0
	for _, uid := range members {
		if wp := h.GetWaitingPod(uid); wp != nil && wp.Reject(plugin, msg) {
			rejected++
		}
	}
	return rejected
}
