package plugin

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
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
	if len(sc.preBinds) != 0 || len(sc.postBind) != 1 {
		t.Errorf("sidecar PreBind %v PostBind %v, want none and one: the Binding carried the annotations",
			sc.preBinds, sc.postBind)
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

func TestBindLeavesPodsThatAreNotOursToTheNextBinder(t *testing.T) {
	p, _, bindings := bindRig(t, map[string]string{"x": "y"})
	ctx := context.Background()
	plain := ourMember("solo", "") // no PodGroup
	other := member("a", "o-0", "g")
	other.Spec.SchedulerName = "default-scheduler"
	for _, pod := range []*v1.Pod{plain, other} {
		if st := p.Bind(ctx, framework.NewCycleState(), pod, "n1"); !st.IsSkip() {
			t.Errorf("Bind(%s) = %v, want Skip", pod.Name, st)
		}
	}
	if len(*bindings) != 0 {
		t.Fatalf("%d Bindings written for pods that are not ours", len(*bindings))
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
}
