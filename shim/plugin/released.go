package plugin

import (
	"context"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// The gang admission barrier. A pod of ours annotated pyextender.io/gang-barrier
// stays in kube-scheduler's queue (PreEnqueue) until the sidecar releases it on
// the WatchReleased stream: one stream per profile replaces a scheduling-gate
// PATCH per pod. The released set is the stream's state; PreEnqueue only looks
// it up, since kube-scheduler calls PreEnqueue from its event handlers, under the
// queue's lock.

// GangBarrierAnnotation marks a pod held at the barrier (any non-empty value).
const GangBarrierAnnotation = "pyextender.io/gang-barrier"

const (
	// defaultReleaseBackoff is the first wait before reopening a stream that
	// ended, doubled after each failure up to defaultReleaseBackoffCap: a
	// sidecar that restarts is found within a fraction of a second, one that
	// stays down costs a connection attempt every 5 s.
	defaultReleaseBackoff    = 200 * time.Millisecond
	defaultReleaseBackoffCap = 5 * time.Second
)

// released is the set of pods (by UID) the sidecar let through the barrier and
// that have not been bound or deleted since. It is bounded by the pods pending
// in the cluster: Bind and the pod informer's deletes prune it, and every
// reconnect's first message replaces it (a stream's full message: replace; an
// incremental one: add). The zero value is ready to use; safe for concurrent use
// (the stream writes, PreEnqueue and the hints read).
type released = uidSet

// podGetter finds a pod in kube-scheduler's pod informer; tests fake it.
type podGetter interface {
	Get(namespace, name string) (*v1.Pod, error)
}

// informerPods is podGetter over the informer's lister (no API call).
type informerPods struct{ lister corelisters.PodLister }

func (l informerPods) Get(namespace, name string) (*v1.Pod, error) {
	return l.lister.Pods(namespace).Get(name)
}

// held: the pod waits at the barrier (annotated and not released yet).
func (p *Pyextender) held(pod *v1.Pod) bool {
	return p.ours(pod) && pod.Annotations[GangBarrierAnnotation] != "" && !p.released.has(pod.UID)
}

// PreEnqueue holds a pod at the barrier until the sidecar releases it; a map
// lookup, no call. UnschedulableAndUnresolvable keeps it in the unschedulable
// pool, out of the active queue; Activate (from the stream) brings it back.
func (p *Pyextender) PreEnqueue(_ context.Context, pod *v1.Pod) *fwk.Status {
	if !p.held(pod) {
		return nil
	}
	group := gangOf(pod)
	if group == "" {
		group = "(none: no " + GroupNameAnnotation + " annotation)"
	}
	return fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"waiting for pyextender to release its gang, PodGroup %s (annotation %s)", group, GangBarrierAnnotation))
}

// EventsToRegister: without it, kube-scheduler requeues a pod this plugin
// rejected on every event of every resource (defaultEnqueueExtension in
// pkg/scheduler/framework/runtime, with the hint Queue). The same events are
// registered here, with a hint that leaves a pod held at the barrier where it
// is: only Activate from the stream releases it. Pods our Filter, Reserve or
// Permit rejected still go back on any event.
//
// The events are the wildcard unrolled per resource, as upstream's default
// does, not {Resource: "*", ActionType: All}: the framework would accept the
// wildcard and call its hint, but it also builds its informer handlers from the
// registered resources (addAllEventHandlers), and "*" is none (it only logs
// "Incorrect event registration"), so resources no other plugin registers
// would send no events. A held pod is also left out of the queue's periodic
// flush, a wildcard event, which moves a pod gated at PreEnqueue only when its
// gating plugin registered the wildcard.
func (p *Pyextender) EventsToRegister(context.Context) ([]fwk.ClusterEventWithHint, error) {
	events := framework.UnrollWildCardResource()
	for i := range events {
		events[i].QueueingHintFn = p.queueingHint
	}
	return events, nil
}

// queueingHint: a pod held at the barrier is not worth requeuing on any
// cluster event; every other pod we rejected is, as before.
func (p *Pyextender) queueingHint(_ klog.Logger, pod *v1.Pod, _, _ any) (fwk.QueueingHint, error) {
	if p.held(pod) {
		return fwk.QueueSkip, nil
	}
	return fwk.Queue, nil
}

// startWatchReleased runs watchReleased until ctx is done or Close is called;
// the channel it returns is closed once the stream's goroutine has stopped.
func (p *Pyextender) startWatchReleased(ctx context.Context) <-chan struct{} {
	ctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	p.stopReleased = sync.OnceFunc(func() {
		cancel()
		<-stopped
	})
	go func() {
		defer close(stopped)
		p.watchReleased(ctx)
	}()
	return stopped
}

// watchReleased keeps a WatchReleased stream open until ctx is done: when it
// ends (the sidecar restarted, or is not up yet) it is reopened after a
// backoff, and the new stream's first (full) message resets the set.
func (p *Pyextender) watchReleased(ctx context.Context) {
	logger := klog.FromContext(ctx)
	first, limit := p.releaseBackoff, p.releaseBackoffCap
	if first <= 0 {
		first = defaultReleaseBackoff
	}
	if limit <= 0 {
		limit = defaultReleaseBackoffCap
	}
	wait, failures := first, 0
	for {
		got, err := p.readReleased(ctx, logger)
		if ctx.Err() != nil {
			return
		}
		if got { // the sidecar was serving: retry soon
			wait, failures = first, 0
		}
		failures++
		// a sidecar that stays down (or predates WatchReleased) is logged once
		// per outage, then at V(2), not every few seconds
		log := logger.V(2)
		if failures == 1 {
			log = logger.V(0)
		}
		log.Info("pyextender: the released-pods stream ended; pods at the gang barrier wait until it is back",
			"target", p.target, "err", err, "retryIn", wait, "failures", failures)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, limit)
	}
}

// readReleased opens one stream and applies its messages until it ends; got
// says whether any message arrived. No timeout: the stream lives as long as
// the sidecar serves it.
func (p *Pyextender) readReleased(ctx context.Context, logger klog.Logger) (got bool, err error) {
	stream, err := p.client.WatchReleased(ctx, &pb.WatchReleasedRequest{Client: p.schedulerName})
	if err != nil {
		return false, err
	}
	for {
		msg, err := stream.Recv()
		if err != nil {
			return got, err // io.EOF when the sidecar closed the stream
		}
		got = true
		p.applyReleased(logger, msg)
	}
}

// applyReleased records one message's pods as released, then moves those
// kube-scheduler already queues to the active queue (PreEnqueue now passes
// them). A pod not in the informer yet needs nothing: it passes PreEnqueue
// when it arrives. A pod of the same name with another UID is another pod.
func (p *Pyextender) applyReleased(logger klog.Logger, msg *pb.ReleasedPods) {
	uids := make([]types.UID, 0, len(msg.GetPods()))
	for _, ref := range msg.GetPods() {
		if ref.GetUid() != "" {
			uids = append(uids, types.UID(ref.GetUid()))
		}
	}
	// the set first: a pod activated before it is released would be held again
	if msg.GetFull() {
		p.released.replace(uids)
	} else {
		p.released.add(uids...)
	}
	if p.pods == nil || p.activator == nil {
		return
	}
	found := make(map[string]*v1.Pod, len(msg.GetPods()))
	for _, ref := range msg.GetPods() {
		pod, err := p.pods.Get(ref.GetNamespace(), ref.GetName())
		if err != nil || pod.UID != types.UID(ref.GetUid()) {
			continue
		}
		found[ref.GetNamespace()+"/"+ref.GetName()] = pod
	}
	// Only with a pod found: the framework gets its queue (SetPodActivator)
	// after New returns, and the informer is started after that, so a pod in
	// the informer means Activate has a queue to move it in.
	if len(found) > 0 {
		p.activator.Activate(logger, found)
	}
	logger.V(4).Info("pyextender: pods released at the gang barrier",
		"full", msg.GetFull(), "pods", len(uids), "activated", len(found), "released", p.released.len())
}

// forgetDeleted is the pod informer's DeleteFunc: a deleted pod (or one that
// reached Succeeded/Failed, which the scheduler's informer filters out) will
// not be scheduled, so its release is dropped.
func (p *Pyextender) forgetDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		p.released.remove(pod.UID)
	}
}

// watchDeletes registers forgetDeleted on kube-scheduler's pod informer and
// looks pods up in it; without an informer factory (tests) it does neither.
func (p *Pyextender) watchDeletes(h fwk.Handle) error {
	f := h.SharedInformerFactory()
	if f == nil {
		return nil
	}
	pods := f.Core().V1().Pods()
	p.pods = informerPods{lister: pods.Lister()}
	_, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: p.forgetDeleted})
	return err
}
