package plugin

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	fwk "k8s.io/kube-scheduler/framework"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// fakeWaiting is a pod held in Permit; it records what happened to it.
type fakeWaiting struct {
	pod      *v1.Pod
	allowed  bool
	rejected string
}

func (w *fakeWaiting) GetPod() *v1.Pod             { return w.pod }
func (w *fakeWaiting) GetPendingPlugins() []string { return []string{Name} }
func (w *fakeWaiting) Allow(string)                { w.allowed = true }
func (w *fakeWaiting) Preempt(string, string) bool { return false }
func (w *fakeWaiting) Reject(_, msg string) bool {
	if w.rejected != "" || w.allowed {
		return false
	}
	w.rejected = msg
	return true
}

// fakeHandle holds waiting pods like the framework's waiting-pods map.
type fakeHandle struct{ pods map[types.UID]*fakeWaiting }

func (h *fakeHandle) IterateOverWaitingPods(cb func(fwk.WaitingPod)) {
	for _, w := range h.pods {
		cb(w)
	}
}

func (h *fakeHandle) GetWaitingPod(uid types.UID) fwk.WaitingPod {
	if w, ok := h.pods[uid]; ok {
		return w
	}
	return nil
}

func member(ns, name, group string) *v1.Pod {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "-" + name)}}
	if group != "" {
		pod.Annotations = map[string]string{GroupNameAnnotation: group}
	}
	return pod
}

func handleWith(pods ...*v1.Pod) *fakeHandle {
	h := &fakeHandle{pods: map[types.UID]*fakeWaiting{}}
	for _, p := range pods {
		h.pods[p.UID] = &fakeWaiting{pod: p}
	}
	return h
}

func TestGangOf(t *testing.T) {
	cases := []struct {
		pod  *v1.Pod
		want string
	}{
		{member("a", "p", "g"), "a/g"},
		{member("b", "p", "g"), "b/g"}, // same group name, other namespace: another gang
		{member("a", "p", ""), ""},
	}
	for _, c := range cases {
		if got := gangOf(c.pod); got != c.want {
			t.Errorf("gangOf(%s/%s) = %q, want %q", c.pod.Namespace, c.pod.Name, got, c.want)
		}
	}
}

func TestWaitingMembersAreThoseOfTheSameGangExceptSelf(t *testing.T) {
	h := handleWith(member("a", "g-0", "g"), member("a", "g-1", "g"), member("b", "g-0", "g"), member("a", "h-0", "h"))
	got := waitingMembers(h, "a/g", "a-g-0")
	if !slices.Equal(got, []string{"a-g-1"}) {
		t.Fatalf("waitingMembers = %v, want [a-g-1]", got)
	}
}

func TestAllowGangAllowsEveryWaitingMemberAndNoOther(t *testing.T) {
	h := handleWith(member("a", "g-0", "g"), member("a", "g-1", "g"), member("a", "h-0", "h"))
	if n := allowGang(h, "a/g", Name); n != 2 {
		t.Fatalf("allowGang allowed %d, want 2", n)
	}
	for uid, w := range h.pods {
		want := uid != "a-h-0"
		if w.allowed != want {
			t.Errorf("%s allowed=%v, want %v", uid, w.allowed, want)
		}
	}
}

func TestRejectGangRejectsTheWholeGangOnce(t *testing.T) {
	h := handleWith(member("a", "g-0", "g"), member("a", "g-1", "g"), member("a", "h-0", "h"))
	if n := rejectGang(h, "a/g", Name, "gang a/g: member a/g-2 was unreserved"); n != 2 {
		t.Fatalf("rejectGang rejected %d, want 2", n)
	}
	if h.pods["a-h-0"].rejected != "" {
		t.Error("a pod of another gang was rejected")
	}
	if h.pods["a-g-0"].rejected != "gang a/g: member a/g-2 was unreserved" {
		t.Errorf("reason = %q", h.pods["a-g-0"].rejected)
	}
	// a second rejection (the rejected pods' own Unreserve) changes nothing
	if n := rejectGang(h, "a/g", Name, "again"); n != 0 {
		t.Fatalf("second rejectGang rejected %d, want 0", n)
	}
}

func TestPermitDecision(t *testing.T) {
	wait := &pb.PermitResponse{
		Status:  &pb.Status{Code: pb.Code_WAIT, Reason: "gang a/g: 2/3 members reserved"},
		Timeout: durationpb.New(20 * time.Second),
	}
	cases := []struct {
		name     string
		reply    *pb.PermitResponse
		code     fwk.Code
		wait     time.Duration
		contains string
	}{
		{"allow", &pb.PermitResponse{Status: &pb.Status{}}, fwk.Success, 0, ""},
		{"allow without status", &pb.PermitResponse{}, fwk.Success, 0, ""},
		{"wait", wait, fwk.Wait, 20 * time.Second, "2/3 members"},
		{"wait without timeout", &pb.PermitResponse{Status: &pb.Status{Code: pb.Code_WAIT}}, fwk.Unschedulable, 0, "without a timeout"},
		{"reject", &pb.PermitResponse{Status: &pb.Status{Code: pb.Code_UNSCHEDULABLE, Reason: "no"}}, fwk.Unschedulable, 0, "no"},
		{"unknown pod", &pb.PermitResponse{Status: &pb.Status{Code: pb.Code_ERROR, Reason: "not known"}}, fwk.Error, 0, "not known"},
		{"skip is not a permit answer", &pb.PermitResponse{Status: &pb.Status{Code: pb.Code_SKIP}}, fwk.Error, 0, "unexpected"},
	}
	for _, c := range cases {
		st, d := permitDecision(c.reply)
		if st.Code() != c.code || d != c.wait {
			t.Errorf("%s: got (%s, %v), want (%s, %v)", c.name, st.Code(), d, c.code, c.wait)
		}
		if !strings.Contains(st.Message(), c.contains) {
			t.Errorf("%s: message %q lacks %q", c.name, st.Message(), c.contains)
		}
	}
}

func TestOursIsAPodOfOurScheduler(t *testing.T) {
	p := &Pyextender{schedulerName: "volcano"}
	gang := member("a", "g-0", "g")
	gang.Spec.SchedulerName = "volcano"
	lone := member("a", "solo", "")
	lone.Spec.SchedulerName = "volcano"
	other := member("a", "o-0", "g")
	other.Spec.SchedulerName = "default-scheduler"
	if !p.ours(gang) || !p.ours(lone) || p.ours(other) {
		t.Fatalf("ours: gang=%v lone=%v other=%v, want true true false", p.ours(gang), p.ours(lone), p.ours(other))
	}
}

func TestReadVerdictsFromColumns(t *testing.T) {
	names := []string{"a", "b", "c"}
	reply := &pb.FilterResponse{
		Codes:       []byte{0, byte(pb.Code_UNSCHEDULABLE_AND_UNRESOLVABLE), byte(pb.Code_UNSCHEDULABLE)},
		Reasons:     []string{"", "Insufficient nvidia.com/gpu", "node is not in the pyextender cache yet"},
		ReasonIndex: []byte{0, 0, 1, 0, 2, 0},
	}
	got, err := readVerdicts(names, reply)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := got["a"]; ok || len(got) != 2 {
		t.Fatalf("verdicts = %v, want b and c only", got)
	}
	if got["b"].Code() != fwk.UnschedulableAndUnresolvable || got["b"].Message() != "Insufficient nvidia.com/gpu" {
		t.Errorf("b: %s %q", got["b"].Code(), got["b"].Message())
	}
	if got["c"].Code() != fwk.Unschedulable {
		t.Errorf("c: %s", got["c"].Code())
	}
	bad := []*pb.FilterResponse{
		{Codes: []byte{0, 0}, ReasonIndex: make([]byte, 6)},                                    // short codes
		{Codes: []byte{0, 0, 2}, Reasons: []string{""}, ReasonIndex: []byte{0, 0, 0, 0, 9, 0}}, // index out of range
	}
	for i, r := range bad {
		if _, err := readVerdicts(names, r); err == nil {
			t.Errorf("bad reply %d accepted", i)
		}
	}
}
