package plugin

import (
	"context"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// cycleServer is a sidecar over an in-memory connection. With cycle false it
// has no Cycle method (UNIMPLEMENTED, as an older sidecar).
type cycleServer struct {
	pb.UnimplementedSchedulerServer
	cycle   atomic.Bool
	streams atomic.Int32 // Cycle streams opened
	unary   atomic.Int32 // unary Filter and Reserve calls
	mu      sync.Mutex
	seen    []uint64 // seq of every stream request
	// answer decides each stream reply; nil: answer as a sidecar would
	answer func(n int, req *pb.CycleRequest) (*pb.CycleResponse, error)
}

func (s *cycleServer) Filter(_ context.Context, req *pb.FilterRequest) (*pb.FilterResponse, error) {
	s.unary.Add(1)
	return &pb.FilterResponse{Status: &pb.Status{}, Codes: make([]byte, len(req.NodeNames)), Pick: "unary"}, nil
}

func (s *cycleServer) Reserve(context.Context, *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	s.unary.Add(1)
	return &pb.ReserveResponse{Status: &pb.Status{}, Annotations: map[string]string{"via": "unary"}}, nil
}

func (s *cycleServer) Cycle(stream pb.Scheduler_CycleServer) error {
	if !s.cycle.Load() {
		return status.Error(codes.Unimplemented, "unknown method Cycle")
	}
	s.streams.Add(1)
	for n := 0; ; n++ {
		req, err := stream.Recv()
		if err != nil {
			return nil // the shim closed it
		}
		s.mu.Lock()
		s.seen = append(s.seen, req.Seq)
		s.mu.Unlock()
		var reply *pb.CycleResponse
		if s.answer != nil {
			if reply, err = s.answer(n, req); err != nil {
				return err
			}
		} else {
			reply = &pb.CycleResponse{}
			switch call := req.Call.(type) {
			case *pb.CycleRequest_Filter:
				reply.Reply = &pb.CycleResponse_Filter{Filter: &pb.FilterResponse{
					Status: &pb.Status{}, Codes: make([]byte, len(call.Filter.NodeNames)), Pick: "stream"}}
			case *pb.CycleRequest_Reserve:
				reply.Reply = &pb.CycleResponse_Reserve{Reserve: &pb.ReserveResponse{
					Status: &pb.Status{}, Annotations: map[string]string{"via": "stream"}}}
			}
		}
		if reply.Seq == 0 {
			reply.Seq = req.Seq
		}
		if err := stream.Send(reply); err != nil {
			return err
		}
	}
}

// cycleRig is the plugin talking to srv over an in-memory connection.
func cycleRig(t *testing.T, srv *cycleServer) *Pyextender {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	gs := grpc.NewServer()
	pb.RegisterSchedulerServer(gs, srv)
	go func() { _ = gs.Serve(lis) }()
	conn, err := grpc.NewClient("passthrough:///sidecar",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	client := pb.NewSchedulerClient(conn)
	p := &Pyextender{client: client, cycle: newCycleStream(ctx, client), timeout: time.Second}
	t.Cleanup(func() {
		p.cycle.close()
		cancel()
		conn.Close()
		gs.Stop()
	})
	return p
}

func askFilter(p *Pyextender) (*pb.FilterResponse, error) {
	ctx, cancel := p.call(context.Background())
	defer cancel()
	return p.filter(ctx, &pb.FilterRequest{Pod: &pb.PodRef{Name: "p"}, NodeNames: []string{"a", "b"}})
}

func askReserve(p *Pyextender) (*pb.ReserveResponse, error) {
	ctx, cancel := p.call(context.Background())
	defer cancel()
	return p.reserve(ctx, &pb.ReserveRequest{Pod: &pb.PodRef{Name: "p"}, NodeName: "a"})
}

func TestFilterAndReserveGoOnOneCycleStream(t *testing.T) {
	srv := &cycleServer{}
	srv.cycle.Store(true)
	p := cycleRig(t, srv)
	for i := 0; i < 3; i++ {
		f, err := askFilter(p)
		if err != nil || f.Pick != "stream" || len(f.Codes) != 2 {
			t.Fatalf("filter %d: %v %v", i, f, err)
		}
		r, err := askReserve(p)
		if err != nil || r.Annotations["via"] != "stream" {
			t.Fatalf("reserve %d: %v %v", i, r, err)
		}
	}
	if n := srv.streams.Load(); n != 1 {
		t.Errorf("%d streams opened for six calls, want 1", n)
	}
	if n := srv.unary.Load(); n != 0 {
		t.Errorf("%d unary calls, want 0", n)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if want := []uint64{1, 2, 3, 4, 5, 6}; !slices.Equal(srv.seen, want) {
		t.Errorf("seq %v, want %v", srv.seen, want)
	}
}

func TestASidecarWithoutCycleGetsUnaryCallsAndIsAskedAgainLater(t *testing.T) {
	srv := &cycleServer{}
	p := cycleRig(t, srv)
	now := time.Now()
	p.cycle.now = func() time.Time { return now }
	opened := 0
	open := p.cycle.open
	p.cycle.open = func(ctx context.Context) (pb.Scheduler_CycleClient, error) {
		opened++
		return open(ctx)
	}
	for i := 0; i < 3; i++ {
		f, err := askFilter(p)
		if err != nil || f.Pick != "unary" {
			t.Fatalf("filter %d: %v %v", i, f, err)
		}
	}
	if r, err := askReserve(p); err != nil || r.Annotations["via"] != "unary" {
		t.Fatalf("reserve: %v %v", r, err)
	}
	if opened != 1 {
		t.Errorf("the stream was tried %d times, want once until %v pass", opened, cycleRetry)
	}
	// upgraded meanwhile: after cycleRetry the stream is tried, and used
	srv.cycle.Store(true)
	now = now.Add(cycleRetry + time.Second)
	if f, err := askFilter(p); err != nil || f.Pick != "stream" || opened != 2 {
		t.Fatalf("after %v: %v %v (opened %d)", cycleRetry, f, err, opened)
	}
}

func TestALateReplyFailsTheCallAndTheNextCallOpensANewStream(t *testing.T) {
	release := make(chan struct{})
	srv := &cycleServer{}
	srv.cycle.Store(true)
	srv.answer = func(n int, req *pb.CycleRequest) (*pb.CycleResponse, error) {
		if srv.streams.Load() == 1 {
			<-release // the first stream never answers in time
		}
		return &pb.CycleResponse{Reply: &pb.CycleResponse_Filter{Filter: &pb.FilterResponse{Pick: "second"}}}, nil
	}
	p := cycleRig(t, srv)
	p.timeout = 200 * time.Millisecond
	defer close(release)
	start := time.Now()
	_, err := askFilter(p)
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("late reply: %v, want DeadlineExceeded", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("gave up after %v, want about %v", took, p.timeout)
	}
	f, err := askFilter(p)
	if err != nil || f.Pick != "second" {
		t.Fatalf("next call: %v %v", f, err)
	}
	if n := srv.streams.Load(); n != 2 {
		t.Errorf("%d streams, want 2", n)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if got := srv.seen[len(srv.seen)-1]; got != 2 {
		t.Errorf("the second request's seq %d, want 2 (counted across streams)", got)
	}
}

func TestASidecarRefusalIsTheCallsErrorAndTheStreamIsReopened(t *testing.T) {
	srv := &cycleServer{}
	srv.cycle.Store(true)
	srv.answer = func(n int, req *pb.CycleRequest) (*pb.CycleResponse, error) {
		if n == 1 {
			return nil, status.Error(codes.InvalidArgument, "pyextender.v1.ReserveRequest: node_name: required")
		}
		return &pb.CycleResponse{Reply: &pb.CycleResponse_Reserve{Reserve: &pb.ReserveResponse{}}}, nil
	}
	p := cycleRig(t, srv)
	if _, err := askReserve(p); err != nil {
		t.Fatal(err)
	}
	_, err := askReserve(p)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(status.Convert(err).Message(), "node_name: required") {
		t.Fatalf("refused call: %v", err)
	}
	if _, err := askReserve(p); err != nil {
		t.Fatalf("after the refusal: %v", err)
	}
	if n := srv.streams.Load(); n != 2 {
		t.Errorf("%d streams, want 2", n)
	}
}

func TestAReplyToAnotherRequestOrOfAnotherKindIsAnError(t *testing.T) {
	srv := &cycleServer{}
	srv.cycle.Store(true)
	srv.answer = func(n int, req *pb.CycleRequest) (*pb.CycleResponse, error) {
		if req.Seq == 1 {
			return &pb.CycleResponse{Seq: req.Seq + 7, Reply: &pb.CycleResponse_Filter{Filter: &pb.FilterResponse{}}}, nil
		}
		return &pb.CycleResponse{Reply: &pb.CycleResponse_Reserve{Reserve: &pb.ReserveResponse{}}}, nil
	}
	p := cycleRig(t, srv)
	if _, err := askFilter(p); status.Code(err) != codes.Internal {
		t.Fatalf("wrong seq: %v, want Internal", err)
	}
	if _, err := askFilter(p); err == nil || !strings.Contains(err.Error(), "answered a Filter with") {
		t.Fatalf("wrong kind: %v", err)
	}
}

func TestASidecarThatIsDownIsUnavailableOnTheStreamAsOnUnaryCalls(t *testing.T) {
	conn, err := grpc.NewClient("unix://"+t.TempDir()+"/absent.sock", grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	client := pb.NewSchedulerClient(conn)
	p := &Pyextender{client: client, cycle: newCycleStream(context.Background(), client), timeout: time.Second}
	for i := 0; i < 2; i++ {
		if _, err := askFilter(p); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want Unavailable", i, err)
		}
	}
	if !p.cycle.unaryUntil.IsZero() {
		t.Error("a sidecar that is down was taken for one without Cycle")
	}
}
