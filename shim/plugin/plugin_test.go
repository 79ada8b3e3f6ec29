package plugin

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// bindSidecar answers Reserve with annotations and records PreBind/PostBind.
type bindSidecar struct {
	pb.SchedulerClient // other methods are not called
	annotations        map[string]string
	preBinds, postBind []string
}

func (s *bindSidecar) Reserve(context.Context, *pb.ReserveRequest, ...grpc.CallOption) (*pb.ReserveResponse, error) {
	return &pb.ReserveResponse{Status: &pb.Status{}, Annotations: s.annotations}, nil
}

func (s *bindSidecar) PreBind(_ context.Context, in *pb.PreBindRequest, _ ...grpc.CallOption) (*pb.PreBindResponse, error) {
	s.preBinds = append(s.preBinds, in.Pod.Name+"@"+in.NodeName)
	return &pb.PreBindResponse{Status: &pb.Status{}}, nil
}

func (s *bindSidecar) PostBind(_ context.Context, in *pb.PostBindRequest, _ ...grpc.CallOption) (*pb.PostBindResponse, error) {
	s.postBind = append(s.postBind, in.Pod.Name+"@"+in.NodeName)
	return &pb.PostBindResponse{Status: &pb.Status{}}, nil
}

// clientHandle is a framework handle with only a client (no API cacher).
type clientHandle struct {
	fwk.Handle // other methods are not called
	cs         kubernetes.Interface
}

func (h clientHandle) ClientSet() kubernetes.Interface { return h.cs }
func (h clientHandle) APICacher() fwk.APICacher        { return nil }

// bindRig is the plugin over a fake sidecar and a fake clientset that records Bindings.
func bindRig(t *testing.T, annotations map[string]string) (*Pyextender, *bindSidecar, *[]*v1.Binding) {
	t.Helper()
	cs := fake.NewClientset()
	var bindings []*v1.Binding
	cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.GetSubresource() != "binding" {
			return false, nil, nil
		}
		bindings = append(bindings, a.(k8stesting.CreateAction).GetObject().(*v1.Binding))
		return true, nil, nil
	})
	sc := &bindSidecar{annotations: annotations}
	p := &Pyextender{
		handle:        clientHandle{cs: cs},
		waiting:       handleWith(),
		client:        sc,
		timeout:       time.Second,
		schedulerName: "volcano",
	}
	return p, sc, &bindings
}

func ourMember(name, group string) *v1.Pod {
	pod := member("a", name, group)
	pod.Spec.SchedulerName = "volcano"
	return pod
}

func TestBindCarriesTheAnnotationsReserveChose(t *testing.T) {
	p, sc, bindings := bindRig(t, map[string]string{"pyextender.io/gpu-index": "3"})
	ctx, state, pod := context.Background(), framework.NewCycleState(), ourMember("g-0", "g")
	if st := p.Reserve(ctx, state, pod, "n1"); !st.IsSuccess() {
		t.Fatalf("Reserve: %v", st)
	}
	if st := p.Bind(ctx, state, pod, "n1"); !st.IsSuccess() {
		t.Fatalf("Bind: %v", st)
	}
	p.PostBind(ctx, state, pod, "n1")
	if len(*bindings) != 1 {
		t.Fatalf("%d Bindings written, want 1", len(*bindings))
	}
	b := (*bindings)[0]
	if b.Name != "g-0" || b.Namespace != "a" || b.UID != pod.UID || b.Target.Name != "n1" || b.Target.Kind != "Node" {
		t.Errorf("Binding %s/%s uid %s -> %s %s, want a/g-0 uid %s -> Node n1",
			b.Namespace, b.Name, b.UID, b.Target.Kind, b.Target.Name, pod.UID)
	}
	if got := b.Annotations["pyextender.io/gpu-index"]; got != "3" {
		t.Errorf("Binding annotation gpu-index = %q, want 3", got)
	}
	if len(sc.preBinds) != 0 || len(sc.postBind) != 0 {
		t.Errorf("sidecar PreBind %v PostBind %v, want no call: the Binding carried the annotations "+
			"and the sidecar's watch counts the bind", sc.preBinds, sc.postBind)
	}
}

func TestBindWithoutAnnotationsWritesAPlainBinding(t *testing.T) {
	p, _, bindings := bindRig(t, nil)
	ctx, state, pod := context.Background(), framework.NewCycleState(), ourMember("g-0", "g")
	p.Reserve(ctx, state, pod, "n2")
	if st := p.Bind(ctx, state, pod, "n2"); !st.IsSuccess() {
		t.Fatalf("Bind: %v", st)
	}
	if len(*bindings) != 1 || len((*bindings)[0].Annotations) != 0 {
		t.Fatalf("Bindings %v, want one without annotations", *bindings)
	}
}

func TestBindLeavesPodsOfOtherSchedulersToTheNextBinder(t *testing.T) {
	p, _, bindings := bindRig(t, map[string]string{"x": "y"})
	ctx := context.Background()
	other := member("a", "o-0", "g")
	other.Spec.SchedulerName = "default-scheduler"
	lone := member("a", "o-1", "")
	lone.Spec.SchedulerName = "default-scheduler"
	for _, pod := range []*v1.Pod{other, lone} {
		if st := p.Bind(ctx, framework.NewCycleState(), pod, "n1"); !st.IsSkip() {
			t.Errorf("Bind(%s) = %v, want Skip", pod.Name, st)
		}
	}
	if len(*bindings) != 0 {
		t.Fatalf("%d Bindings written for pods of another scheduler", len(*bindings))
	}
}

// A pod of our scheduler without a PodGroup goes through the sidecar like a gang
// member (Filter with scores, Reserve, the Binding with its GPUs), as
// the HTTP extender sees it; only Permit, the gang barrier, asks nothing.
func TestAPodWithoutAPodGroupIsPlacedAndBoundThroughTheSidecar(t *testing.T) {
	p, sc, bindings := bindRig(t, map[string]string{"pyextender.io/gpu-index": "1,2"})
	filters := &filterSidecar{codes: []byte{0}, scores: []byte{50}}
	lone := ourMember("solo", "")
	ctx, state := context.Background(), framework.NewCycleState()
	p.client = filters
	if _, st := p.PreFilter(ctx, state, lone, nodeInfos("n1")); !st.IsSuccess() || filters.request == nil {
		t.Fatalf("PreFilter = %v with request %v, want success after a Filter call", st, filters.request)
	}
	p.client = sc
	if st := p.Reserve(ctx, state, lone, "n1"); !st.IsSuccess() {
		t.Fatalf("Reserve: %v", st)
	}
	// no Permit call: the sidecar stub here has no Permit (it would panic)
	if st, wait := p.Permit(ctx, state, lone, "n1"); !st.IsSuccess() || wait != 0 {
		t.Fatalf("Permit = %v, %v; want success at once", st, wait)
	}
	if st := p.Bind(ctx, state, lone, "n1"); !st.IsSuccess() {
		t.Fatalf("Bind: %v", st)
	}
	p.PostBind(ctx, state, lone, "n1")
	if len(*bindings) != 1 || (*bindings)[0].Annotations["pyextender.io/gpu-index"] != "1,2" {
		t.Fatalf("Bindings %v, want one carrying gpu-index 1,2", *bindings)
	}
	if len(sc.postBind) != 0 || len(sc.preBinds) != 0 {
		t.Errorf("sidecar PreBind %v PostBind %v, want no call (the watch counts the bind)", sc.preBinds, sc.postBind)
	}
}

func TestPostBindWritesAnnotationsAnotherBinderLeftOut(t *testing.T) {
	p, sc, bindings := bindRig(t, map[string]string{"pyextender.io/gpu-index": "0"})
	ctx, state, pod := context.Background(), framework.NewCycleState(), ourMember("g-1", "g")
	p.Reserve(ctx, state, pod, "n1")
	// DefaultBinder bound it (a profile without bind: [Pyextender]): our Bind never ran
	p.PostBind(ctx, state, pod, "n1")
	if len(*bindings) != 0 {
		t.Fatalf("%d Bindings written by PostBind", len(*bindings))
	}
	if len(sc.preBinds) != 1 || sc.preBinds[0] != "g-1@n1" {
		t.Fatalf("sidecar PreBind calls %v, want [g-1@n1]: the annotations must still reach the pod", sc.preBinds)
	}
	if len(sc.postBind) != 1 {
		t.Fatalf("sidecar PostBind calls %v, want one: the bind by another plugin is counted", sc.postBind)
	}
}

// filterSidecar answers Filter with fixed columns and counts Score calls.
type filterSidecar struct {
	pb.SchedulerClient // other methods are not called
	codes, scores      []byte
	pick               string
	scoreCalls         int
	request            *pb.FilterRequest
}

func (s *filterSidecar) Filter(_ context.Context, in *pb.FilterRequest, _ ...grpc.CallOption) (*pb.FilterResponse, error) {
	s.request = in
	return &pb.FilterResponse{
		Status: &pb.Status{}, Codes: s.codes, Reasons: []string{"", "Insufficient nvidia.com/gpu"},
		ReasonIndex: make([]byte, 2*len(s.codes)), Scores: s.scores, Pick: s.pick,
	}, nil
}

func (s *filterSidecar) Reserve(context.Context, *pb.ReserveRequest, ...grpc.CallOption) (*pb.ReserveResponse, error) {
	return &pb.ReserveResponse{Status: &pb.Status{}}, nil
}

func (s *filterSidecar) Score(_ context.Context, in *pb.ScoreRequest, _ ...grpc.CallOption) (*pb.ScoreResponse, error) {
	s.scoreCalls++
	return &pb.ScoreResponse{Status: &pb.Status{}, Scores: make([]byte, len(in.NodeNames))}, nil
}

func nodeInfos(names ...string) []fwk.NodeInfo {
	out := make([]fwk.NodeInfo, 0, len(names))
	for _, n := range names {
		info := framework.NewNodeInfo()
		info.SetNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}})
		out = append(out, info)
	}
	return out
}

func TestFilterReplyScoresTheCycleWithoutAScoreCall(t *testing.T) {
	sc := &filterSidecar{codes: []byte{0, byte(pb.Code_UNSCHEDULABLE), 0}, scores: []byte{70, 0, 40}}
	p := &Pyextender{client: sc, timeout: time.Second, schedulerName: "volcano"}
	ctx, state, pod := context.Background(), framework.NewCycleState(), ourMember("g-0", "g")
	all := nodeInfos("n1", "n2", "n3")
	if _, st := p.PreFilter(ctx, state, pod, all); !st.IsSuccess() {
		t.Fatalf("PreFilter: %v", st)
	}
	if !sc.request.WithScores {
		t.Fatal("Filter asked without with_scores")
	}
	if st := p.Filter(ctx, state, pod, all[1]); st.IsSuccess() {
		t.Fatal("n2 passed Filter though the sidecar rejected it")
	}
	feasible := []fwk.NodeInfo{all[0], all[2]}
	if st := p.PreScore(ctx, state, pod, feasible); !st.IsSuccess() {
		t.Fatalf("PreScore: %v", st)
	}
	if sc.scoreCalls != 0 {
		t.Fatalf("%d Score calls, want none: Filter's reply had the scores", sc.scoreCalls)
	}
	for node, want := range map[fwk.NodeInfo]int64{all[0]: 70, all[2]: 40} {
		if got, st := p.Score(ctx, state, pod, node); got != want || !st.IsSuccess() {
			t.Errorf("Score(%s) = %d %v, want %d", node.Node().Name, got, st, want)
		}
	}
}

func TestWithoutScoresInTheFilterReplyPreScoreAsksTheSidecar(t *testing.T) {
	sc := &filterSidecar{codes: []byte{0, 0}} // a sidecar that does not score at Filter
	p := &Pyextender{client: sc, timeout: time.Second, schedulerName: "volcano"}
	ctx, state, pod := context.Background(), framework.NewCycleState(), ourMember("g-0", "g")
	all := nodeInfos("n1", "n2")
	p.PreFilter(ctx, state, pod, all)
	if st := p.PreScore(ctx, state, pod, all); !st.IsSuccess() || sc.scoreCalls != 1 {
		t.Fatalf("PreScore %v with %d Score calls, want success with 1", st, sc.scoreCalls)
	}
}

// activations records the pods PostFilter sent back to the active queue.
type activations struct{ keys []string }

func (a *activations) Activate(_ klog.Logger, pods map[string]*v1.Pod) {
	for k := range pods {
		a.keys = append(a.keys, k)
	}
}

func TestThePickNarrowsTheCycleAndATurnedDownPickRequeuesThePod(t *testing.T) {
	sc := &filterSidecar{codes: []byte{0, 0, 0}, scores: []byte{40, 90, 60}, pick: "n2"}
	queue := &activations{}
	p := &Pyextender{client: sc, activator: queue, waiting: handleWith(), timeout: time.Second, schedulerName: "volcano"}
	ctx, state, pod := context.Background(), framework.NewCycleState(), ourMember("g-0", "g")
	res, st := p.PreFilter(ctx, state, pod, nodeInfos("n1", "n2", "n3"))
	if !st.IsSuccess() || res == nil || !res.NodeNames.Equal(sets.New("n2")) {
		t.Fatalf("PreFilter = %v, %v; want success narrowed to n2", res, st)
	}
	// kube-scheduler turned n2 down: PostFilter requeues the pod and stops preemption
	_, st = p.PostFilter(ctx, state, pod, nil)
	if st.Code() != fwk.UnschedulableAndUnresolvable || !strings.Contains(st.Message(), "n2") {
		t.Fatalf("PostFilter = %v, want UnschedulableAndUnresolvable naming n2", st)
	}
	if !slices.Equal(queue.keys, []string{"a/g-0"}) {
		t.Fatalf("activated %v, want [a/g-0]", queue.keys)
	}
	// the requeued attempt evaluates every node, though the sidecar picks n2 again
	state = framework.NewCycleState()
	if res, st := p.PreFilter(ctx, state, pod, nodeInfos("n1", "n2", "n3")); !st.IsSuccess() || res != nil {
		t.Fatalf("PreFilter after a turned-down pick = %v, %v; want every node", res, st)
	}
	if _, st := p.PostFilter(ctx, state, pod, nil); st.Code() != fwk.Unschedulable || len(queue.keys) != 1 {
		t.Fatalf("PostFilter of an unnarrowed cycle = %v, activated %v; want Unschedulable, no requeue", st, queue.keys)
	}
	// once reserved, the pod's picks count again
	if st := p.Reserve(ctx, state, pod, "n3"); !st.IsSuccess() {
		t.Fatalf("Reserve: %v", st)
	}
	if res, _ := p.PreFilter(ctx, framework.NewCycleState(), pod, nodeInfos("n1", "n2", "n3")); res == nil {
		t.Fatal("PreFilter after Reserve ignored the pick")
	}
}

func TestWithoutAPickEveryNodeIsEvaluatedAndPostFilterDefers(t *testing.T) {
	cases := map[string]*filterSidecar{
		"no pick":               {codes: []byte{0, 0}, scores: []byte{40, 90}},
		"a pick it rejected":    {codes: []byte{0, byte(pb.Code_UNSCHEDULABLE)}, scores: []byte{40, 0}, pick: "n2"},
		"a pick not among them": {codes: []byte{0, 0}, scores: []byte{40, 90}, pick: "n9"},
	}
	for name, sc := range cases {
		queue := &activations{}
		p := &Pyextender{client: sc, activator: queue, timeout: time.Second, schedulerName: "volcano"}
		ctx, state, pod := context.Background(), framework.NewCycleState(), ourMember("g-0", "g")
		if res, st := p.PreFilter(ctx, state, pod, nodeInfos("n1", "n2")); !st.IsSuccess() || res != nil {
			t.Errorf("%s: PreFilter = %v, %v; want success over every node", name, res, st)
		}
		if _, st := p.PostFilter(ctx, state, pod, nil); st.Code() != fwk.Unschedulable || len(queue.keys) != 0 {
			t.Errorf("%s: PostFilter = %v, activated %v; want Unschedulable (the next plugin's turn), none", name, st, queue.keys)
		}
	}
}
