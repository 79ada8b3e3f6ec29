package plugin

import (
	"bufio"
	"context"
	"encoding/binary"
	"io"
	"net"
	"path/filepath"
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
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

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
	p := &Pyextender{client: client, cycle: newCycleStream(ctx, client, ""), timeout: time.Second}
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
	p.cycle.open = func(ctx context.Context) (cycleConn, error) {
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
	p := &Pyextender{client: client, cycle: newCycleStream(context.Background(), client, ""), timeout: time.Second}
	for i := 0; i < 2; i++ {
		if _, err := askFilter(p); status.Code(err) != codes.Unavailable {
			t.Fatalf("call %d: %v, want Unavailable", i, err)
		}
	}
	if !p.cycle.unaryUntil.IsZero() {
		t.Error("a sidecar that is down was taken for one without Cycle")
	}
}

// socketServer is a sidecar's cycle socket: delimited CycleRequests in,
// delimited CycleResponses out. refuse, when set, refuses the nth request of a
// connection (0-based) with that code and closes the connection.
type socketServer struct {
	lis    net.Listener
	conns  atomic.Int32
	mu     sync.Mutex
	seen   []uint64
	refuse map[int]codes.Code
}

func startSocketServer(t *testing.T, path string, refuse map[int]codes.Code) *socketServer {
	t.Helper()
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := &socketServer{lis: lis, refuse: refuse}
	t.Cleanup(func() { lis.Close() })
	go func() {
		for {
			conn, err := lis.Accept()
			if err != nil {
				return
			}
			s.conns.Add(1)
			go s.serve(conn)
		}
	}()
	return s
}

func (s *socketServer) serve(conn net.Conn) {
	defer conn.Close()
	r := bufio.NewReader(conn)
	for n := 0; ; n++ {
		size, err := binary.ReadUvarint(r)
		if err != nil {
			return
		}
		body := make([]byte, size)
		if _, err := io.ReadFull(r, body); err != nil {
			return
		}
		req := &pb.CycleRequest{}
		if err := proto.Unmarshal(body, req); err != nil {
			return
		}
		s.mu.Lock()
		s.seen = append(s.seen, req.Seq)
		s.mu.Unlock()
		reply := &pb.CycleResponse{Seq: req.Seq}
		code, refused := s.refuse[n]
		switch call := req.Call.(type) {
		case *pb.CycleRequest_Filter:
			reply.Reply = &pb.CycleResponse_Filter{Filter: &pb.FilterResponse{
				Status: &pb.Status{}, Codes: make([]byte, len(call.Filter.NodeNames)), Pick: "socket"}}
		case *pb.CycleRequest_Reserve:
			reply.Reply = &pb.CycleResponse_Reserve{Reserve: &pb.ReserveResponse{
				Status: &pb.Status{}, Annotations: map[string]string{"via": "socket"}}}
		}
		if refused {
			reply = &pb.CycleResponse{RefusedCode: uint32(code), RefusedMessage: "refused for the test"}
		}
		out, _ := proto.Marshal(reply)
		if _, err := conn.Write(append(protowire.AppendVarint(nil, uint64(len(out))), out...)); err != nil || refused {
			return
		}
	}
}

// socketRig is cycleRig with the cycle socket at path (it may not exist yet).
func socketRig(t *testing.T, srv *cycleServer, path string) *Pyextender {
	t.Helper()
	p := cycleRig(t, srv)
	p.cycle.dial, p.cycle.socketPath = dialCycleSocket(path), path
	return p
}

func TestFilterAndReserveGoOnTheCycleSocket(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cycle.sock")
	sock := startSocketServer(t, path, nil)
	srv := &cycleServer{}
	srv.cycle.Store(true)
	p := socketRig(t, srv, path)
	for i := 0; i < 3; i++ {
		if f, err := askFilter(p); err != nil || f.Pick != "socket" {
			t.Fatalf("filter %d: %v %v", i, f, err)
		}
		if r, err := askReserve(p); err != nil || r.Annotations["via"] != "socket" {
			t.Fatalf("reserve %d: %v %v", i, r, err)
		}
	}
	if sock.conns.Load() != 1 || srv.streams.Load() != 0 || srv.unary.Load() != 0 {
		t.Errorf("%d socket connections, %d gRPC streams, %d unary calls; want 1, 0, 0",
			sock.conns.Load(), srv.streams.Load(), srv.unary.Load())
	}
	sock.mu.Lock()
	defer sock.mu.Unlock()
	if want := []uint64{1, 2, 3, 4, 5, 6}; !slices.Equal(sock.seen, want) {
		t.Errorf("seq %v, want %v", sock.seen, want)
	}
}

func TestARefusalOnTheCycleSocketIsItsStatusAndTheNextCallReconnects(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cycle.sock")
	sock := startSocketServer(t, path, map[int]codes.Code{1: codes.InvalidArgument})
	p := socketRig(t, &cycleServer{}, path)
	if _, err := askFilter(p); err != nil {
		t.Fatal(err)
	}
	_, err := askReserve(p)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "refused for the test") {
		t.Fatalf("refusal: %v", err)
	}
	if f, err := askFilter(p); err != nil || f.Pick != "socket" {
		t.Fatalf("after the refusal: %v %v", f, err)
	}
	if sock.conns.Load() != 2 {
		t.Errorf("%d connections, want 2 (a new one after the refusal)", sock.conns.Load())
	}
}

func TestAnUnreachableCycleSocketFallsBackToTheStreamUntilTriedAgain(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cycle.sock")
	srv := &cycleServer{}
	srv.cycle.Store(true)
	p := socketRig(t, srv, path) // nothing listens there yet
	now := time.Now()
	p.cycle.now = func() time.Time { return now }
	dials := 0
	dial := p.cycle.dial
	p.cycle.dial = func(ctx context.Context) (cycleConn, error) {
		dials++
		return dial(ctx)
	}
	for i := 0; i < 3; i++ {
		if f, err := askFilter(p); err != nil || f.Pick != "stream" {
			t.Fatalf("filter %d: %v %v", i, f, err)
		}
	}
	if dials != 1 || srv.streams.Load() != 1 {
		t.Fatalf("%d dials and %d streams, want 1 and 1", dials, srv.streams.Load())
	}
	// the socket appears (a sidecar restarted); the open stream keeps serving until
	// it ends, and after socketRetry the next connection tries the socket again
	sock := startSocketServer(t, path, nil)
	p.cycle.close()
	if f, err := askFilter(p); err != nil || f.Pick != "stream" || dials != 1 {
		t.Fatalf("before %v: %v %v (dials %d)", socketRetry, f, err, dials)
	}
	p.cycle.close()
	now = now.Add(socketRetry + time.Second)
	if f, err := askFilter(p); err != nil || f.Pick != "socket" || dials != 2 || sock.conns.Load() != 1 {
		t.Fatalf("after %v: %v %v (dials %d)", socketRetry, f, err, dials)
	}
}
