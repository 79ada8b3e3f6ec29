package plugin

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// barrierPod is a pod of ours in PodGroup a/<group>, held at the barrier.
func barrierPod(name, group string) *v1.Pod {
	pod := ourMember(name, group)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[GangBarrierAnnotation] = "true"
	return pod
}

func TestReleasedSet(t *testing.T) {
	var r released // the zero value is ready
	if r.has("x") || r.len() != 0 {
		t.Fatal("an empty set holds x")
	}
	r.remove("x") // harmless when empty
	r.add([]types.UID{"a", "b"}...)
	r.replace([]types.UID{"b", "c"})
	if r.has("a") || !r.has("b") || !r.has("c") || r.len() != 2 {
		t.Fatalf("after replace: a=%v b=%v c=%v len=%d, want false true true 2", r.has("a"), r.has("b"), r.has("c"), r.len())
	}
	r.remove("b")
	if r.has("b") || r.len() != 1 {
		t.Fatal("remove kept b")
	}
	var fresh released
	fresh.replace(nil)
	fresh.add([]types.UID{"d"}...)
	if !fresh.has("d") {
		t.Fatal("add after replace(nil) lost d")
	}
}

func TestPreEnqueueHoldsAnnotatedPodsUntilReleased(t *testing.T) {
	p := &Pyextender{schedulerName: "volcano"}
	ctx := context.Background()
	other := barrierPod("o-0", "g")
	other.Spec.SchedulerName = "default-scheduler"
	if st := p.PreEnqueue(ctx, other); !st.IsSuccess() {
		t.Errorf("a pod of another scheduler: %v, want success", st)
	}
	if st := p.PreEnqueue(ctx, ourMember("g-0", "g")); !st.IsSuccess() {
		t.Errorf("a pod of ours without the annotation: %v, want success", st)
	}
	held := barrierPod("g-1", "g")
	st := p.PreEnqueue(ctx, held)
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "PodGroup a/g") {
		t.Fatalf("a held pod: %v, want UnschedulableAndUnresolvable naming PodGroup a/g", st)
	}
	lone := barrierPod("solo", "")
	if st := p.PreEnqueue(ctx, lone); st.IsSuccess() || !strings.Contains(st.Message(), GroupNameAnnotation) {
		t.Errorf("a held pod without a PodGroup: %v, want held, saying it has no %s", st, GroupNameAnnotation)
	}
	p.released.add([]types.UID{held.UID}...)
	if st := p.PreEnqueue(ctx, held); !st.IsSuccess() {
		t.Errorf("a released pod: %v, want success", st)
	}
}

func TestQueueingHintLeavesHeldPodsWhereTheyAre(t *testing.T) {
	p := &Pyextender{schedulerName: "volcano"}
	held, freed := barrierPod("g-0", "g"), barrierPod("g-1", "g")
	p.released.add([]types.UID{freed.UID}...)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	cases := map[*v1.Pod]fwk.QueueingHint{
		held:                    fwk.QueueSkip,
		freed:                   fwk.Queue,
		ourMember("g-2", "g"):   fwk.Queue, // rejected by our Filter: requeued as before
		ourMember("solo-0", ""): fwk.Queue,
	}
	for pod, want := range cases {
		if got, err := p.queueingHint(klog.Background(), pod, nil, node); got != want || err != nil {
			t.Errorf("%s: %v, %v; want %v", pod.Name, got, err, want)
		}
	}
}

// The events are those kube-scheduler registers for a plugin without
// EnqueueExtensions (every resource, every action), each with our hint.
func TestEventsToRegisterAreTheDefaultsWithTheBarriersHint(t *testing.T) {
	p := &Pyextender{schedulerName: "volcano"}
	events, err := p.EventsToRegister(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got, want []string
	for _, e := range events {
		got = append(got, e.Event.Label())
		if e.QueueingHintFn == nil {
			t.Errorf("%s has no hint", e.Event.Label())
		} else if h, _ := e.QueueingHintFn(klog.Background(), barrierPod("g-0", "g"), nil, nil); h != fwk.QueueSkip {
			t.Errorf("%s: hint %v for a held pod, want QueueSkip", e.Event.Label(), h)
		}
	}
	for _, e := range framework.UnrollWildCardResource() {
		want = append(want, e.Event.Label())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// streamItem is what one Recv returns.
type streamItem struct {
	msg *pb.ReleasedPods
	err error
}

// fakeStream is a WatchReleased stream the test feeds one Recv at a time: a
// send returns once the plugin has taken the item, i.e. has applied every
// message before it.
type fakeStream struct {
	grpc.ClientStream // other methods are not called
	ctx               context.Context
	items             chan streamItem
}

func (s *fakeStream) Recv() (*pb.ReleasedPods, error) {
	select {
	case it := <-s.items:
		return it.msg, it.err
	case <-s.ctx.Done():
		return nil, status.FromContextError(s.ctx.Err()).Err()
	}
}

// releaseSidecar opens a fakeStream per WatchReleased call and hands it to the test.
type releaseSidecar struct {
	pb.SchedulerClient // other methods are not called
	opened             chan *fakeStream
	clients            chan string
}

func newReleaseSidecar() *releaseSidecar {
	return &releaseSidecar{opened: make(chan *fakeStream, 1), clients: make(chan string, 16)}
}

func (s *releaseSidecar) WatchReleased(ctx context.Context, in *pb.WatchReleasedRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[pb.ReleasedPods], error) {
	st := &fakeStream{ctx: ctx, items: make(chan streamItem)}
	s.clients <- in.Client
	s.opened <- st
	return st, nil
}

func (s *releaseSidecar) next(t *testing.T) *fakeStream {
	t.Helper()
	select {
	case st := <-s.opened:
		return st
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin did not open a WatchReleased stream")
		return nil
	}
}

func (s *fakeStream) send(t *testing.T, it streamItem) {
	t.Helper()
	select {
	case s.items <- it:
	case <-time.After(5 * time.Second):
		t.Fatal("the plugin did not read the stream")
	}
}

// fakePods is the pod informer: pods by namespace/name.
type fakePods map[string]*v1.Pod

func (f fakePods) Get(namespace, name string) (*v1.Pod, error) {
	if pod, ok := f[namespace+"/"+name]; ok {
		return pod, nil
	}
	return nil, fmt.Errorf("pod %s/%s not found", namespace, name)
}

// activationCalls records each Activate call's pod keys.
type activationCalls struct {
	mu    sync.Mutex
	calls [][]string
}

func (a *activationCalls) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.calls = append(a.calls, slices.Sorted(maps.Keys(pods)))
}

func (a *activationCalls) get() [][]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.calls)
}

func TestReleasedStreamReleasesActivatesAndReconnects(t *testing.T) {
	a, b, c := barrierPod("g-0", "g"), barrierPod("g-1", "g"), barrierPod("g-2", "g")
	staleC := c.DeepCopy()
	staleC.UID = "re-created" // the informer has another pod under c's name
	queue := &activationCalls{}
	sc := newReleaseSidecar()
	p := &Pyextender{
		client: sc, activator: queue, schedulerName: "volcano", target: "unix:///test.sock",
		pods:           fakePods{"a/g-0": a, "a/g-1": b, "a/g-2": staleC},
		releaseBackoff: time.Millisecond, releaseBackoffCap: 2 * time.Millisecond,
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stopped := p.startWatchReleased(ctx)

	s1 := sc.next(t)
	if client := <-sc.clients; client != "volcano" {
		t.Errorf("WatchReleasedRequest.client = %q, want volcano", client)
	}
	s1.send(t, streamItem{msg: &pb.ReleasedPods{Full: true, Pods: []*pb.PodRef{ref(a)}}})
	s1.send(t, streamItem{msg: &pb.ReleasedPods{Pods: []*pb.PodRef{ref(b), ref(c)}}})
	s1.send(t, streamItem{err: status.Error(codes.Unavailable, "sidecar restarting")})
	// both messages are applied once the error was taken
	for _, pod := range []*v1.Pod{a, b, c} {
		if !p.released.has(pod.UID) {
			t.Errorf("%s not released after the first stream", pod.Name)
		}
	}
	want := [][]string{{"a/g-0"}, {"a/g-1"}} // one call per message; g-2's informer copy is another pod
	if got := queue.get(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Activate calls %v, want %v", got, want)
	}

	// the plugin reconnects; the new stream's full message replaces the set
	s2 := sc.next(t)
	s2.send(t, streamItem{msg: &pb.ReleasedPods{Full: true, Pods: []*pb.PodRef{ref(b)}}})
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the stream's goroutine outlived the scheduler's context")
	}
	if p.released.has(a.UID) || p.released.has(c.UID) || !p.released.has(b.UID) {
		t.Errorf("after the second full message: a=%v b=%v c=%v, want false true false",
			p.released.has(a.UID), p.released.has(b.UID), p.released.has(c.UID))
	}
	want = append(want, []string{"a/g-1"})
	if got := queue.get(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("Activate calls %v, want %v", got, want)
	}
	if err := p.Close(); err != nil { // Close after that returns at once
		t.Fatal(err)
	}
}

// downSidecar fails every WatchReleased call, as a sidecar that is not up.
type downSidecar struct {
	pb.SchedulerClient
	calls chan struct{}
}

func (s *downSidecar) WatchReleased(context.Context, *pb.WatchReleasedRequest, ...grpc.CallOption) (grpc.ServerStreamingClient[pb.ReleasedPods], error) {
	s.calls <- struct{}{}
	return nil, status.Error(codes.Unavailable, "connection refused")
}

func TestReleasedStreamRetriesUntilClose(t *testing.T) {
	sc := &downSidecar{calls: make(chan struct{})}
	p := &Pyextender{client: sc, releaseBackoff: time.Millisecond, releaseBackoffCap: 2 * time.Millisecond}
	p.startWatchReleased(context.Background())
	for i := 0; i < 3; i++ {
		select {
		case <-sc.calls:
		case <-time.After(5 * time.Second):
			t.Fatalf("attempt %d: the plugin stopped retrying", i)
		}
	}
	go func() { // Close may catch the goroutine in a call: let it return
		for range sc.calls {
		}
	}()
	closed := make(chan error)
	go func() { closed <- p.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the stream")
	}
	close(sc.calls)
}

func TestBindForgetsTheRelease(t *testing.T) {
	p, _, _ := bindRig(t, nil)
	ctx, pod := context.Background(), barrierPod("g-0", "g")
	p.released.add([]types.UID{pod.UID}...)
	if st := p.Bind(ctx, framework.NewCycleState(), pod, "n1"); !st.IsSuccess() {
		t.Fatalf("Bind: %v", st)
	}
	if p.released.has(pod.UID) {
		t.Fatal("a bound pod is still released")
	}

	// a failed Bind keeps it: the pod goes back to the queue, released
	cs := fake.NewClientset()
	cs.PrependReactor("create", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("conflict")
	})
	p.handle = clientHandle{cs: cs}
	p.released.add([]types.UID{pod.UID}...)
	if st := p.Bind(ctx, framework.NewCycleState(), pod, "n1"); st.IsSuccess() {
		t.Fatal("Bind succeeded against a failing API")
	}
	if !p.released.has(pod.UID) {
		t.Fatal("a failed Bind forgot the release")
	}
}

func TestForgetDeleted(t *testing.T) {
	p := &Pyextender{}
	a, b := barrierPod("g-0", "g"), barrierPod("g-1", "g")
	p.released.add([]types.UID{a.UID, b.UID, "other"}...)
	p.forgetDeleted(a)
	p.forgetDeleted(cache.DeletedFinalStateUnknown{Key: "a/g-1", Obj: b})
	p.forgetDeleted("not a pod")
	if p.released.has(a.UID) || p.released.has(b.UID) || !p.released.has("other") {
		t.Fatalf("after deletes: a=%v b=%v other=%v, want false false true",
			p.released.has(a.UID), p.released.has(b.UID), p.released.has("other"))
	}
}

// informerHandle is a framework handle with only an informer factory.
type informerHandle struct {
	fwk.Handle // other methods are not called
	f          informers.SharedInformerFactory
}

func (h informerHandle) SharedInformerFactory() informers.SharedInformerFactory { return h.f }

// Over a real informer: the plugin looks pods up in it, and a pod deleted from
// the API is no longer released.
func TestWatchDeletesUsesThePodInformer(t *testing.T) {
	pod := barrierPod("g-0", "g")
	cs := fake.NewClientset(pod)
	f := informers.NewSharedInformerFactory(cs, 0)
	p := &Pyextender{}
	if err := p.watchDeletes(informerHandle{f: f}); err != nil {
		t.Fatal(err)
	}
	if err := (&Pyextender{}).watchDeletes(informerHandle{}); err != nil { // no factory (tests): nothing to do
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	if got, err := p.pods.Get("a", "g-0"); err != nil || got.UID != pod.UID {
		t.Fatalf("informer lookup: %v, %v", got, err)
	}
	p.released.add([]types.UID{pod.UID}...)
	if err := cs.CoreV1().Pods("a").Delete(ctx, "g-0", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.released.has(pod.UID) {
		if time.Now().After(deadline) {
			t.Fatal("a deleted pod is still released")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
