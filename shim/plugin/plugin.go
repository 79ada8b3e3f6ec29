// Package plugin is Pyextender, a kube-scheduler framework plugin that asks the
// pyextender sidecar (gRPC, proto/pyextender/v1) at PreFilter and Reserve (two
// calls per pod; Filter, Score and Permit answer from their replies),
// Unreserve, and PostBind only after another bind plugin bound a pod; it binds
// the pods itself (the Binding carries the GPU indices chosen at Reserve).
//
// Every pod of our scheduler is forwarded, gang member or not, as the HTTP
// extender sees every pod of its profile: the sidecar filters, scores and
// reserves it (choosing its GPUs), and the plugin binds it. Only Permit is for
// gangs alone; a pod without a PodGroup annotation has nothing to wait for. A
// pod with another schedulerName passes through untouched.
//
// Filter and Score are batched: PreFilter asks the sidecar once about every
// node, and the reply carries the verdicts and the scores of the nodes that
// fit; Filter and Score answer the framework's per-node calls from it.
//
// When the reply also names the node the sidecar picked (as extender mode's
// filter picks one), PreFilter narrows the cycle to it: kube-scheduler runs
// its own filters on that node alone and, with one node left, skips scoring.
// Should one of them turn the node down (something the sidecar does not
// model, e.g. a host port), PostFilter sends the pod straight back to the
// queue, and neither the plugin (picks.go) nor the sidecar, which sees a pick
// that never reached Reserve, narrows it again until it is reserved.
//
// Permit is the gang barrier. The sidecar counts the gang's members (bound,
// reserved, or waiting here) and answers allow or wait, in Reserve's reply
// (kube-scheduler runs Permit right after Reserve) or, from an older sidecar,
// to a Permit call. On allow, every waiting
// member of the gang is allowed at once. A gang waits while new members keep
// reaching Permit (gangwait.go): once none has arrived for the sidecar's stall
// window, or the gang has waited its cap, a watchdog rejects every waiting
// member. When a waiting member times out or is unreserved, every other
// waiting member of its gang is rejected too, so a gang binds whole or not at
// all. When the sidecar cannot be reached the pod fails with a status that
// says so; a gang pod is never let through on a guess.
//
// Before all that comes the gang admission barrier (released.go): a pod
// annotated pyextender.io/gang-barrier stays in kube-scheduler's queue until
// the sidecar releases it. The plugin keeps one WatchReleased stream open to
// the sidecar, which names the pods it lets through (all of them when the
// stream opens, then each new release); PreEnqueue holds every annotated pod
// not named yet, and a release moves the pod straight to the active queue. No
// API write per pod, and no cluster event wakes a held pod before its release.
package plugin

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/klog/v2"
	fwk "k8s.io/kube-scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// Name is the plugin's name in a KubeSchedulerConfiguration.
const Name = "Pyextender"

const (
	defaultTarget      = "unix:///run/pyextender/scheduler.sock"
	defaultCallTimeout = 5 * time.Second
	filterKey          = fwk.StateKey(Name + "/filter")
	scoreKey           = fwk.StateKey(Name + "/score")
	bindKey            = fwk.StateKey(Name + "/bind")
	pickKey            = fwk.StateKey(Name + "/pick")
	permitKey          = fwk.StateKey(Name + "/permit")
)

// Args are the plugin's pluginConfig args.
type Args struct {
	// Target is the sidecar's gRPC address: "unix:///path/to.sock" (the default,
	// unix:///run/pyextender/scheduler.sock) or "host:port".
	Target string `json:"target,omitempty"`
	// CAFile, for a host:port target, turns TLS on, trusting this PEM bundle.
	CAFile string `json:"caFile,omitempty"`
	// CallTimeout bounds every call to the sidecar (default 5s).
	CallTimeout metav1.Duration `json:"callTimeout,omitempty"`
	// SchedulerName of the pods we forward (default: the profile's name).
	SchedulerName string `json:"schedulerName,omitempty"`
	// CycleSocket is the path of the sidecar's cycle socket (its --cycle-socket):
	// Filter and Reserve go there, as Cycle messages without gRPC. Empty: on the
	// gRPC Cycle stream. Unreachable (a sidecar restarting, or one without the
	// socket): on the gRPC stream, and the socket is dialled again after 10 s.
	CycleSocket string `json:"cycleSocket,omitempty"`
}

// Pyextender implements the framework extension points by asking the sidecar.
type Pyextender struct {
	handle        fwk.Handle  // the framework's client, for Bind
	waiting       waitingPods // the framework's pods held in Permit
	activator     activator   // the framework's queue, for PostFilter and the barrier's releases
	client        pb.SchedulerClient
	cycle         *cycleStream // Filter and Reserve on one stream; nil: unary calls
	target        string
	timeout       time.Duration
	schedulerName string
	gangWaits     *gangWaits
	turnedDown    turnedDown // pods whose pick kube-scheduler turned down (picks.go)
	stopWatchdog  func()

	// the gang admission barrier (released.go)
	released          released  // pods the sidecar let through, by UID
	pods              podGetter // kube-scheduler's pod informer; nil: activate nothing
	releaseBackoff    time.Duration
	releaseBackoffCap time.Duration // 0: the defaults (200ms, 5s)
	stopReleased      func()
}

var (
	_ fwk.PreEnqueuePlugin  = &Pyextender{}
	_ fwk.EnqueueExtensions = &Pyextender{}
	_ fwk.PreFilterPlugin   = &Pyextender{}
	_ fwk.PostFilterPlugin  = &Pyextender{}
	_ fwk.FilterPlugin      = &Pyextender{}
	_ fwk.PreScorePlugin    = &Pyextender{}
	_ fwk.ScorePlugin       = &Pyextender{}
	_ fwk.ReservePlugin     = &Pyextender{}
	_ fwk.PermitPlugin      = &Pyextender{}
	_ fwk.BindPlugin        = &Pyextender{}
	_ fwk.PostBindPlugin    = &Pyextender{}
	_ io.Closer             = &Pyextender{}
)

// New builds the plugin from its args; the connection is made lazily by gRPC,
// so a sidecar that starts later is found. The gang watchdog and the
// released-pods stream run until ctx (the scheduler's) is done or Close is called.
func New(ctx context.Context, obj runtime.Object, h fwk.Handle) (fwk.Plugin, error) {
	args := Args{}
	if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	if args.Target == "" {
		args.Target = defaultTarget
	}
	if args.CallTimeout.Duration <= 0 {
		args.CallTimeout.Duration = defaultCallTimeout
	}
	if args.SchedulerName == "" {
		args.SchedulerName = h.ProfileName()
	}
	creds := insecure.NewCredentials()
	if args.CAFile != "" {
		tls, err := credentials.NewClientTLSFromFile(args.CAFile, "")
		if err != nil {
			return nil, fmt.Errorf("%s args.caFile: %w", Name, err)
		}
		creds = tls
	}
	conn, err := grpc.NewClient(args.Target, grpc.WithTransportCredentials(creds))
	if err != nil {
		return nil, fmt.Errorf("%s args.target %q: %w", Name, args.Target, err)
	}
	p := &Pyextender{
		handle:        h,
		waiting:       h,
		activator:     h,
		client:        pb.NewSchedulerClient(conn),
		target:        args.Target,
		timeout:       args.CallTimeout.Duration,
		schedulerName: args.SchedulerName,
		gangWaits:     newGangWaits(time.Now),
	}
	p.cycle = newCycleStream(ctx, p.client, args.CycleSocket)
	p.turnedDown.max = maxTurnedDown
	if err := p.watchDeletes(h); err != nil {
		return nil, fmt.Errorf("%s: pod informer: %w", Name, err)
	}
	p.startWatchdog(ctx, watchPeriod)
	p.startWatchReleased(ctx)
	return p, nil
}

// Name implements fwk.Plugin.
func (p *Pyextender) Name() string { return Name }

// ours: a pod of our scheduler; pods of other schedulers pass through.
func (p *Pyextender) ours(pod *v1.Pod) bool {
	return pod.Spec.SchedulerName == p.schedulerName
}

func ref(pod *v1.Pod) *pb.PodRef {
	return &pb.PodRef{
		Uid:             string(pod.UID),
		ResourceVersion: pod.ResourceVersion,
		Namespace:       pod.Namespace,
		Name:            pod.Name,
	}
}

// unreachable turns a failed call into a status that names the sidecar.
func (p *Pyextender) unreachable(point string, err error) *fwk.Status {
	st, _ := status.FromError(err)
	return fwk.NewStatus(fwk.Error, fmt.Sprintf(
		"pyextender sidecar at %s did not answer %s: %s: %s", p.target, point, st.Code(), st.Message()))
}

// toStatus converts the wire status (same codes as fwk.Code).
func toStatus(s *pb.Status) *fwk.Status {
	if s == nil || s.Code == pb.Code_SUCCESS {
		return nil
	}
	if s.Reason == "" {
		return fwk.NewStatus(fwk.Code(s.Code))
	}
	return fwk.NewStatus(fwk.Code(s.Code), s.Reason)
}

func (p *Pyextender) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.timeout)
}

// filterVerdicts are the sidecar's Filter answer for one cycle: rejected nodes only.
type filterVerdicts map[string]*fwk.Status

// Clone implements fwk.StateData; the map is never written after PreFilter.
func (f filterVerdicts) Clone() fwk.StateData { return f }

type nodeScores map[string]int64

// Clone implements fwk.StateData.
func (s nodeScores) Clone() fwk.StateData { return s }

// PreFilter asks the sidecar about the pod and every node in one call: the
// verdicts, and the scores of the nodes that fit, so PreScore needs no call.
func (p *Pyextender) PreFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) (*fwk.PreFilterResult, *fwk.Status) {
	if !p.ours(pod) {
		return nil, fwk.NewStatus(fwk.Skip)
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Node().Name)
	}
	reply, err := p.filter(cctx, &pb.FilterRequest{Pod: ref(pod), NodeNames: names, WithScores: true})
	if err != nil {
		return nil, p.unreachable("Filter", err)
	}
	// the pod-level answer (e.g. its PodGroup does not exist) comes as the status
	if s := toStatus(reply.GetStatus()); s != nil {
		return nil, s
	}
	verdicts, err := readVerdicts(names, reply)
	if err != nil {
		return nil, fwk.NewStatus(fwk.Error, err.Error())
	}
	state.Write(filterKey, verdicts)
	if scores := readScores(names, verdicts, reply.GetScores()); scores != nil {
		state.Write(scoreKey, scores)
	}
	if pick := reply.GetPick(); pick != "" && !p.turnedDown.has(pod.UID) {
		if _, rejected := verdicts[pick]; !rejected && slices.Contains(names, pick) {
			state.Write(pickKey, pickedNode(pick))
			return &fwk.PreFilterResult{NodeNames: sets.New(pick)}, nil
		}
		klog.FromContext(ctx).Info("pyextender: the sidecar picked a node it did not pass; evaluating every node",
			"pod", klog.KObj(pod), "node", pick)
	}
	return nil, nil
}

// pickedNode is the node PreFilter narrowed the cycle to.
type pickedNode string

// Clone implements fwk.StateData.
func (n pickedNode) Clone() fwk.StateData { return n }

// activator is the part of fwk.Handle that moves pods back to the active queue.
type activator interface {
	Activate(logger klog.Logger, pods map[string]*v1.Pod)
}

// PostFilter runs when no node fit. After a cycle narrowed to the sidecar's
// pick, that means one of kube-scheduler's own filters turned the node down:
// the pod goes straight back to the active queue, to be evaluated on every
// node until it is reserved (turnedDown; the sidecar names no pick for it
// either), and UnschedulableAndUnresolvable keeps preemption
// from acting on a one-node view. Otherwise it leaves the pod to the next
// PostFilter plugin (DefaultPreemption). List Pyextender first at postFilter.
func (p *Pyextender) PostFilter(ctx context.Context, state fwk.CycleState, pod *v1.Pod, _ fwk.NodeToStatusReader) (*fwk.PostFilterResult, *fwk.Status) {
	data, err := state.Read(pickKey)
	if err != nil || !p.ours(pod) {
		return nil, fwk.NewStatus(fwk.Unschedulable)
	}
	p.turnedDown.add(pod.UID) // the requeued attempt must see every node
	p.activator.Activate(klog.FromContext(ctx), map[string]*v1.Pod{pod.Namespace + "/" + pod.Name: pod})
	return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, fmt.Sprintf(
		"pyextender: node %s, which the sidecar picked, did not fit; the next attempt evaluates every node", data))
}

// readScores keeps the scores of the nodes that fit, one byte per node in
// request order; nil when the reply has none (a sidecar that does not score
// at Filter: PreScore asks Score then).
func readScores(names []string, verdicts filterVerdicts, column []byte) nodeScores {
	if len(column) != len(names) {
		return nil
	}
	scores := make(nodeScores, len(names)-len(verdicts))
	for i, name := range names {
		if _, rejected := verdicts[name]; !rejected {
			scores[name] = int64(column[i])
		}
	}
	return scores
}

// readVerdicts turns the reply's columns (one code byte and one little-endian
// uint16 reason index per node) into the statuses of the nodes that do not fit.
func readVerdicts(names []string, reply *pb.FilterResponse) (filterVerdicts, error) {
	codes, index, reasons := reply.GetCodes(), reply.GetReasonIndex(), reply.GetReasons()
	if len(codes) != len(names) || len(index) != 2*len(names) {
		return nil, fmt.Errorf("pyextender sidecar returned %d codes and %d reason bytes for %d nodes",
			len(codes), len(index), len(names))
	}
	verdicts := filterVerdicts{}
	for i, code := range codes {
		if code == byte(pb.Code_SUCCESS) {
			continue
		}
		r := int(binary.LittleEndian.Uint16(index[2*i:]))
		if r >= len(reasons) {
			return nil, fmt.Errorf("pyextender sidecar: reason index %d of node %s out of range (%d reasons)",
				r, names[i], len(reasons))
		}
		verdicts[names[i]] = fwk.NewStatus(fwk.Code(code), reasons[r])
	}
	return verdicts, nil
}

// PreFilterExtensions implements fwk.PreFilterPlugin (none: the sidecar keeps its own state).
func (p *Pyextender) PreFilterExtensions() fwk.PreFilterExtensions { return nil }

// Filter answers from the batched verdicts.
func (p *Pyextender) Filter(_ context.Context, state fwk.CycleState, _ *v1.Pod, node fwk.NodeInfo) *fwk.Status {
	data, err := state.Read(filterKey)
	if err != nil {
		return fwk.NewStatus(fwk.Error, "pyextender: no Filter verdicts in this cycle (PreFilter did not run)")
	}
	return data.(filterVerdicts)[node.Node().Name]
}

// PreScore uses the scores Filter's reply carried; without them (or for a node
// they lack) it asks the sidecar to score every feasible node at once.
func (p *Pyextender) PreScore(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodes []fwk.NodeInfo) *fwk.Status {
	if !p.ours(pod) {
		return fwk.NewStatus(fwk.Skip)
	}
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Node().Name)
	}
	if data, err := state.Read(scoreKey); err == nil && covers(data.(nodeScores), names) {
		return nil
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	reply, err := p.client.Score(cctx, &pb.ScoreRequest{Pod: ref(pod), NodeNames: names})
	if err != nil {
		return p.unreachable("Score", err)
	}
	if s := toStatus(reply.GetStatus()); s != nil {
		return s
	}
	if len(reply.Scores) != len(names) {
		return fwk.NewStatus(fwk.Error, fmt.Sprintf(
			"pyextender sidecar returned %d scores for %d nodes", len(reply.Scores), len(names)))
	}
	scores := make(nodeScores, len(names))
	for i, name := range names {
		scores[name] = int64(reply.Scores[i]) // one byte per node, 0..100
	}
	state.Write(scoreKey, scores)
	return nil
}

// covers: every node has a score.
func covers(scores nodeScores, names []string) bool {
	for _, name := range names {
		if _, ok := scores[name]; !ok {
			return false
		}
	}
	return true
}

// Score answers from the batched scores (0..100, the framework's range).
func (p *Pyextender) Score(_ context.Context, state fwk.CycleState, _ *v1.Pod, node fwk.NodeInfo) (int64, *fwk.Status) {
	data, err := state.Read(scoreKey)
	if err != nil {
		return 0, fwk.NewStatus(fwk.Error, "pyextender: no scores in this cycle (PreScore did not run)")
	}
	return data.(nodeScores)[node.Node().Name], nil
}

// ScoreExtensions implements fwk.ScorePlugin (scores are already 0..100).
func (p *Pyextender) ScoreExtensions() fwk.ScoreExtensions { return nil }

// bindAnnotations are what Reserve's reply asked the pod to carry once bound
// (the GPU indices the sidecar chose); Bind writes them on the Binding.
type bindAnnotations map[string]string

// Clone implements fwk.StateData; the map is never written after Reserve.
func (b bindAnnotations) Clone() fwk.StateData { return b }

// Reserve: the sidecar counts the pod on the node (and chooses its GPUs).
func (p *Pyextender) Reserve(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if !p.ours(pod) {
		return nil
	}
	p.turnedDown.remove(pod.UID) // a node came through kube-scheduler: picks count again
	cctx, cancel := p.call(ctx)
	defer cancel()
	req := &pb.ReserveRequest{Pod: ref(pod), NodeName: nodeName}
	if gang := gangOf(pod); gang != "" {
		// Permit runs next, with nothing in between: the sidecar answers it now
		req.WithPermit = true
		req.WaitingMemberUids = waitingMembers(p.waiting, gang, pod.UID)
	}
	reply, err := p.reserve(cctx, req)
	if err != nil {
		return p.unreachable("Reserve", err)
	}
	if s := toStatus(reply.GetStatus()); s != nil {
		return s
	}
	if a := reply.GetAnnotations(); len(a) > 0 {
		state.Write(bindKey, bindAnnotations(a))
	}
	if permit := reply.GetPermit(); permit != nil {
		state.Write(permitKey, permitAnswer{permit})
	}
	return nil
}

// permitAnswer is the sidecar's Permit answer, given at Reserve.
type permitAnswer struct{ reply *pb.PermitResponse }

// Clone implements fwk.StateData; the reply is never written after Reserve.
func (a permitAnswer) Clone() fwk.StateData { return a }

// Unreserve releases the pod in the sidecar and rejects every waiting member of
// its gang: a gang that lost a member must not bind the rest.
func (p *Pyextender) Unreserve(ctx context.Context, _ fwk.CycleState, pod *v1.Pod, nodeName string) {
	if !p.ours(pod) {
		return
	}
	n := 0
	gang := gangOf(pod)
	if gang != "" {
		p.gangWaits.end(gang)
		n = rejectGang(p.waiting, gang, Name, fmt.Sprintf("gang %s: member %s/%s was unreserved", gang, pod.Namespace, pod.Name))
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	if _, err := p.client.Unreserve(cctx, &pb.UnreserveRequest{Pod: ref(pod), NodeName: nodeName}); err != nil {
		klog.FromContext(ctx).Info("pyextender: Unreserve not delivered (the sidecar rebuilds its state on restart)",
			"pod", klog.KObj(pod), "err", err)
	}
	if n > 0 {
		klog.FromContext(ctx).V(2).Info("pyextender: rejected waiting gang members", "gang", gang, "count", n)
	}
}

// Permit is the gang barrier; a pod without a PodGroup passes without a call,
// and so does a gang member whose Reserve reply carried the answer.
func (p *Pyextender) Permit(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) (*fwk.Status, time.Duration) {
	gang := gangOf(pod)
	if !p.ours(pod) || gang == "" {
		return nil, 0
	}
	var reply *pb.PermitResponse
	if data, err := state.Read(permitKey); err == nil {
		reply = data.(permitAnswer).reply
	} else {
		cctx, cancel := p.call(ctx)
		defer cancel()
		reply, err = p.client.Permit(cctx, &pb.PermitRequest{
			Pod:               ref(pod),
			NodeName:          nodeName,
			WaitingMemberUids: waitingMembers(p.waiting, gang, pod.UID),
		})
		if err != nil {
			// never bind a gang member on a guess; Unreserve rejects the waiting rest
			st := p.unreachable("Permit", err)
			return fwk.NewStatus(fwk.Unschedulable, st.Message()), 0
		}
	}
	st, stall := permitDecision(reply)
	switch {
	case st.IsSuccess():
		p.gangWaits.end(gang)
		allowGang(p.waiting, gang, Name)
	case st.IsWait():
		// the gang made progress: its stall window starts again; the framework's
		// timeout is only a backstop beyond the cap
		return st, p.gangWaits.arrive(gang, stall, reply.GetMaxWait().AsDuration(), reply.GetReady(), reply.GetMinMember())
	}
	return st, 0
}

// permitDecision translates the sidecar's Permit reply; with Wait, the
// duration is the stall window.
func permitDecision(reply *pb.PermitResponse) (*fwk.Status, time.Duration) {
	switch code := reply.GetStatus().GetCode(); code {
	case pb.Code_SUCCESS:
		return fwk.NewStatus(fwk.Success), 0
	case pb.Code_WAIT:
		wait := reply.GetTimeout().AsDuration()
		if wait <= 0 {
			return fwk.NewStatus(fwk.Unschedulable, "pyextender: Permit said wait without a timeout"), 0
		}
		return fwk.NewStatus(fwk.Wait, reply.GetStatus().GetReason()), wait
	case pb.Code_ERROR, pb.Code_UNSCHEDULABLE, pb.Code_UNSCHEDULABLE_AND_UNRESOLVABLE:
		return fwk.NewStatus(fwk.Code(code), reply.GetStatus().GetReason()), 0
	default:
		return fwk.NewStatus(fwk.Error, fmt.Sprintf("pyextender: unexpected Permit code %s", code)), 0
	}
}

// Bind writes the pod's Binding with the annotations Reserve chose: one API
// write, where DefaultBinder plus a PreBind PATCH would be two. Pods of other
// schedulers are left to the next bind plugin (DefaultBinder). The profile must
// list Pyextender before DefaultBinder at bind (bind: {enabled: [Pyextender]});
// PostBind catches a profile that does not.
func (p *Pyextender) Bind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) *fwk.Status {
	if !p.ours(pod) {
		return fwk.NewStatus(fwk.Skip)
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		Target:     v1.ObjectReference{Kind: "Node", Name: nodeName},
	}
	if data, err := state.Read(bindKey); err == nil {
		binding.Annotations = data.(bindAnnotations)
		state.Delete(bindKey) // written: PostBind has nothing left to do
	}
	err := p.bind(ctx, binding)
	if err == nil {
		p.released.remove(pod.UID) // bound: it never reaches PreEnqueue again
	}
	return fwk.AsStatus(err)
}

// bind writes the Binding by the same two paths as DefaultBinder: the
// scheduler's API cacher when it has one, else the client.
func (p *Pyextender) bind(ctx context.Context, binding *v1.Binding) error {
	if c := p.handle.APICacher(); c != nil {
		done, err := c.BindPod(binding)
		if err == nil {
			err = c.WaitOnFinish(ctx, done)
		}
		return err
	}
	return p.handle.ClientSet().CoreV1().Pods(binding.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
}

// PostBind has nothing to tell the sidecar when our Bind wrote the Binding: its
// watch shows the pod bound where it had reserved it, and counts it there (a
// call per pod would cost more than the watch event it repeats). When another
// bind plugin bound the pod, the annotations Reserve chose are still unwritten:
// the sidecar's PreBind writes them now, PostBind counts the bind, and the log
// says how to fix the profile.
func (p *Pyextender) PostBind(ctx context.Context, state fwk.CycleState, pod *v1.Pod, nodeName string) {
	if !p.ours(pod) {
		return
	}
	if _, err := state.Read(bindKey); err != nil {
		return // our Bind wrote the Binding, annotations and all
	}
	cctx, cancel := p.call(ctx)
	defer cancel()
	klog.FromContext(ctx).Error(nil, "pyextender: another bind plugin bound the pod, so its annotations "+
		"are written separately; list Pyextender first at bind (plugins.bind.enabled: [{name: Pyextender}])",
		"pod", klog.KObj(pod))
	reply, err := p.client.PreBind(cctx, &pb.PreBindRequest{Pod: ref(pod), NodeName: nodeName})
	if err == nil {
		err = toStatus(reply.GetStatus()).AsError()
	}
	if err != nil {
		klog.FromContext(ctx).Error(err, "pyextender: annotations not written", "pod", klog.KObj(pod))
	}
	if _, err := p.client.PostBind(cctx, &pb.PostBindRequest{Pod: ref(pod), NodeName: nodeName}); err != nil {
		klog.FromContext(ctx).Info("pyextender: PostBind not delivered", "pod", klog.KObj(pod), "err", err)
	}
}
