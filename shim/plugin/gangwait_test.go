package plugin

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/durationpb"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// fakeSidecar answers Permit like the sidecar: a member counts itself and the
// members waiting in the caller; the gang may go once minMember are counted.
type fakeSidecar struct {
	pb.SchedulerClient // other methods are not called
	minMember          int32
	stall, maxWait     time.Duration
	down               bool
	permitAtReserve    bool // Reserve's reply carries the Permit answer
	permitCalls        int
}

func (s *fakeSidecar) Permit(_ context.Context, in *pb.PermitRequest, _ ...grpc.CallOption) (*pb.PermitResponse, error) {
	s.permitCalls++
	if s.down {
		return nil, errors.New("connection refused")
	}
	return s.answer(in.WaitingMemberUids), nil
}

func (s *fakeSidecar) Reserve(_ context.Context, in *pb.ReserveRequest, _ ...grpc.CallOption) (*pb.ReserveResponse, error) {
	resp := &pb.ReserveResponse{Status: &pb.Status{}}
	if s.permitAtReserve && in.WithPermit {
		resp.Permit = s.answer(in.WaitingMemberUids)
	}
	return resp, nil
}

func (s *fakeSidecar) answer(waiting []string) *pb.PermitResponse {
	ready := int32(1 + len(waiting))
	resp := &pb.PermitResponse{Gang: "a/g", Ready: ready, MinMember: s.minMember, Status: &pb.Status{}}
	if ready < s.minMember {
		resp.Status = &pb.Status{Code: pb.Code_WAIT, Reason: "waiting"}
		resp.Timeout = durationpb.New(s.stall)
		if s.maxWait > 0 {
			resp.MaxWait = durationpb.New(s.maxWait)
		}
	}
	return resp
}

func (s *fakeSidecar) Unreserve(context.Context, *pb.UnreserveRequest, ...grpc.CallOption) (*pb.UnreserveResponse, error) {
	return &pb.UnreserveResponse{}, nil
}

// gangRig is the plugin over a fake sidecar, a fake waiting-pods map and a fake clock.
type gangRig struct {
	t       *testing.T
	p       *Pyextender
	h       *fakeHandle
	clock   time.Time
	next    int
	reserve bool // members go through Reserve first, as in the framework's cycle
}

func newGangRig(t *testing.T, sidecar *fakeSidecar) *gangRig {
	r := &gangRig{t: t, h: handleWith(), clock: time.Unix(1_000_000, 0)}
	r.p = &Pyextender{
		waiting:       r.h,
		client:        sidecar,
		timeout:       time.Second,
		schedulerName: "volcano",
		gangWaits:     newGangWaits(func() time.Time { return r.clock }),
	}
	return r
}

// arrive brings the next member of gang a/g to Permit; like the framework, a
// member told to wait joins the waiting pods.
func (r *gangRig) arrive() (*fwk.Status, time.Duration) {
	pod := member("a", fmt.Sprintf("g-%d", r.next), "g")
	pod.Spec.SchedulerName = "volcano"
	r.next++
	state := framework.NewCycleState()
	if r.reserve {
		if st := r.p.Reserve(context.Background(), state, pod, "n1"); !st.IsSuccess() {
			r.t.Fatalf("Reserve: %v", st)
		}
	}
	st, wait := r.p.Permit(context.Background(), state, pod, "n1")
	if st.IsWait() {
		r.h.pods[pod.UID] = &fakeWaiting{pod: pod}
	}
	return st, wait
}

func (r *gangRig) sweep() int { return r.p.rejectExpired(klog.Background()) }

func (r *gangRig) rejected() []string {
	var msgs []string
	for _, w := range r.h.pods {
		if w.rejected != "" {
			msgs = append(msgs, w.rejected)
		}
	}
	return msgs
}

func TestGangThatKeepsArrivingPastTheStallWindowIsNotRejected(t *testing.T) {
	r := newGangRig(t, &fakeSidecar{minMember: 6, stall: 20 * time.Second, maxWait: 10 * time.Minute})
	for i := 0; i < 5; i++ { // one member every 15 s: 60 s in all, 3x the stall window
		st, wait := r.arrive()
		if !st.IsWait() {
			t.Fatalf("member %d: %s, want Wait", i, st.Code())
		}
		// the framework's timeout is the cap (plus the watchdog's margin), not the stall window
		if wait != 10*time.Minute+2*watchPeriod {
			t.Fatalf("member %d: framework timeout %v, want the cap 10m + %v", i, wait, 2*watchPeriod)
		}
		if n := r.sweep(); n != 0 {
			t.Fatalf("member %d: %d rejected right after an arrival", i, n)
		}
		r.clock = r.clock.Add(15 * time.Second)
		if n := r.sweep(); n != 0 {
			t.Fatalf("after member %d: %d rejected 15 s after an arrival (stall window 20 s)", i, n)
		}
	}
	if st, _ := r.arrive(); !st.IsSuccess() {
		t.Fatalf("the 6th member: %s, want Success", st.Code())
	}
	for uid, w := range r.h.pods {
		if !w.allowed || w.rejected != "" {
			t.Errorf("%s: allowed=%v rejected=%q, want allowed", uid, w.allowed, w.rejected)
		}
	}
	r.clock = r.clock.Add(time.Hour)
	if n := r.sweep(); n != 0 || len(r.p.gangWaits.gangs) != 0 {
		t.Fatalf("an allowed gang is still watched: %d rejected, %d gangs", n, len(r.p.gangWaits.gangs))
	}
}

func TestStalledGangIsRejectedWholeWithAMessage(t *testing.T) {
	r := newGangRig(t, &fakeSidecar{minMember: 5, stall: 20 * time.Second, maxWait: 10 * time.Minute})
	for i := 0; i < 3; i++ {
		r.arrive()
		r.clock = r.clock.Add(5 * time.Second)
	}
	r.clock = r.clock.Add(14 * time.Second) // 19 s since the last arrival
	if n := r.sweep(); n != 0 {
		t.Fatalf("%d rejected 19 s after the last arrival (stall window 20 s)", n)
	}
	r.clock = r.clock.Add(time.Second)
	if n := r.sweep(); n != 3 {
		t.Fatalf("stalled gang: %d rejected, want all 3 waiting", n)
	}
	msgs := r.rejected()
	want := "gang a/g: no new member reached Permit for 20s (stall window 20s, waited 30s in all); " +
		"3 members waiting in Permit, 3/5 of minMember ready"
	if len(msgs) != 3 || !strings.HasPrefix(msgs[0], want) {
		t.Fatalf("messages %q, want 3 starting %q", msgs, want)
	}
	if n := r.sweep(); n != 0 || len(r.p.gangWaits.gangs) != 0 {
		t.Fatalf("a rejected gang is still watched: %d rejected, %d gangs", n, len(r.p.gangWaits.gangs))
	}
}

func TestGangWaitIsCappedThoughItProgresses(t *testing.T) {
	r := newGangRig(t, &fakeSidecar{minMember: 100, stall: 20 * time.Second, maxWait: time.Minute})
	for i := 0; i < 6; i++ { // t = 0, 10, ... 50 s
		r.arrive()
		if n := r.sweep(); n != 0 {
			t.Fatalf("%d rejected before the cap", n)
		}
		r.clock = r.clock.Add(10 * time.Second)
	}
	if n := r.sweep(); n != 6 { // t = 60 s: the cap, 10 s after the last arrival
		t.Fatalf("at the cap %d rejected, want all 6", n)
	}
	want := "gang a/g: waited 1m0s in Permit, the cap (last new member 10s ago); 6 members waiting in Permit, 6/100 of minMember ready"
	if msgs := r.rejected(); !strings.HasPrefix(msgs[0], want) {
		t.Fatalf("message %q, want it to start %q", msgs[0], want)
	}
}

func TestFrameworkTimeoutIsTheCapWithinKubeSchedulersMaximum(t *testing.T) {
	cases := []struct {
		name           string
		stall, maxWait time.Duration
		want           time.Duration
	}{
		{"cap", 20 * time.Second, 10 * time.Minute, 10*time.Minute + 2*watchPeriod},
		{"beyond kube-scheduler's 15 min", 20 * time.Second, time.Hour, frameworkMaxWait},
		// an older sidecar sends no max_wait: the gang must assemble within the stall window
		{"no max_wait", 20 * time.Second, 0, 20*time.Second + 2*watchPeriod},
	}
	for _, c := range cases {
		g := newGangWaits(time.Now)
		if got := g.arrive("a/g", c.stall, c.maxWait, 1, 2); got != c.want {
			t.Errorf("%s: framework timeout %v, want %v", c.name, got, c.want)
		}
	}
}

// Unreserving a member ends its gang's wait and rejects the waiting rest; a pod
// without a PodGroup leaves the waiting gang alone.
func TestUnreserveEndsTheGangsWaitButALonePodsDoesNot(t *testing.T) {
	for _, tc := range []struct {
		group                     string
		wantRejected, wantWatched int
	}{{"g", 2, 0}, {"", 0, 1}} {
		r := newGangRig(t, &fakeSidecar{minMember: 5, stall: 20 * time.Second, maxWait: 10 * time.Minute})
		r.arrive()
		r.arrive()
		gone := member("a", "x-9", tc.group)
		gone.Spec.SchedulerName = "volcano"
		r.p.Unreserve(context.Background(), nil, gone, "n1")
		if len(r.rejected()) != tc.wantRejected || len(r.p.gangWaits.gangs) != tc.wantWatched {
			t.Errorf("after Unreserve of a pod of group %q: %d rejected (want %d), %d gangs watched (want %d)",
				tc.group, len(r.rejected()), tc.wantRejected, len(r.p.gangWaits.gangs), tc.wantWatched)
		}
	}
}

func TestUnreachableSidecarNeverLetsAMemberThrough(t *testing.T) {
	r := newGangRig(t, &fakeSidecar{minMember: 2, stall: 20 * time.Second, down: true})
	st, wait := r.arrive()
	if st.Code() != fwk.Unschedulable || wait != 0 || !strings.Contains(st.Message(), "did not answer Permit") {
		t.Fatalf("got (%s %q, %v), want Unschedulable naming the sidecar", st.Code(), st.Message(), wait)
	}
	if len(r.p.gangWaits.gangs) != 0 {
		t.Fatal("a refused member started a gang wait")
	}
}

// signalWaiting is a waiting pod whose rejection is sent on a channel (the
// watchdog rejects from its own goroutine).
type signalWaiting struct {
	pod      *v1.Pod
	rejected chan string
}

func (w *signalWaiting) GetPod() *v1.Pod             { return w.pod }
func (w *signalWaiting) GetPendingPlugins() []string { return []string{Name} }
func (w *signalWaiting) Allow(string)                {}
func (w *signalWaiting) Preempt(string, string) bool { return false }
func (w *signalWaiting) Reject(_, msg string) bool {
	w.rejected <- msg
	return true
}

type oneWaiting struct{ w *signalWaiting }

func (h oneWaiting) IterateOverWaitingPods(cb func(fwk.WaitingPod)) { cb(h.w) }
func (h oneWaiting) GetWaitingPod(types.UID) fwk.WaitingPod         { return h.w }

func TestWatchdogRejectsStalledGangsAndStopsOnClose(t *testing.T) {
	w := &signalWaiting{pod: member("a", "g-0", "g"), rejected: make(chan string, 1)}
	p := &Pyextender{waiting: oneWaiting{w}, gangWaits: newGangWaits(time.Now)}
	p.gangWaits.arrive("a/g", 30*time.Millisecond, time.Minute, 1, 2)
	p.startWatchdog(context.Background(), 5*time.Millisecond)
	select {
	case msg := <-w.rejected:
		if !strings.HasPrefix(msg, "gang a/g: no new member reached Permit") {
			t.Errorf("message %q", msg)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not reject a stalled gang")
	}
	closed := make(chan error)
	go func() { closed <- p.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not stop the watchdog")
	}
	if err := p.Close(); err != nil { // a second Close is harmless
		t.Fatal(err)
	}
}

func TestWatchdogStopsWithTheSchedulersContext(t *testing.T) {
	p := &Pyextender{waiting: handleWith(), gangWaits: newGangWaits(time.Now)}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := p.startWatchdog(ctx, time.Hour)
	cancel()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog outlived the scheduler's context")
	}
	if err := p.Close(); err != nil { // Close after that returns at once
		t.Fatal(err)
	}
}

// A sidecar that answers Permit at Reserve spares the call: the gang waits and
// goes exactly as with the call.
func TestReserveCarriesThePermitAnswer(t *testing.T) {
	for _, atReserve := range []bool{true, false} { // false: an older sidecar
		sc := &fakeSidecar{minMember: 3, stall: 20 * time.Second, maxWait: 10 * time.Minute, permitAtReserve: atReserve}
		r := newGangRig(t, sc)
		r.reserve = true
		for i := 0; i < 2; i++ {
			if st, _ := r.arrive(); !st.IsWait() {
				t.Fatalf("member %d: %v, want Wait", i, st)
			}
		}
		if st, _ := r.arrive(); !st.IsSuccess() {
			t.Fatalf("third member: %v, want Success", st)
		}
		for uid, w := range r.h.pods {
			if !w.allowed {
				t.Errorf("%s not allowed", uid)
			}
		}
		if want := map[bool]int{true: 0, false: 3}[atReserve]; sc.permitCalls != want {
			t.Errorf("permit at Reserve %v: %d Permit calls, want %d", atReserve, sc.permitCalls, want)
		}
	}
}
