package plugin

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"k8s.io/klog/v2"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// cycleConn is one open Cycle: a gRPC stream, or a connection to the cycle socket.
type cycleConn interface {
	Send(*pb.CycleRequest) error
	Recv() (*pb.CycleResponse, error)
}

// maxCycleMessage bounds a reply read from the cycle socket (the sidecar's gRPC
// limit, 16 MiB).
const maxCycleMessage = 16 << 20

// socketConn speaks the cycle socket: each message is its length (a varint) and
// then its bytes, protobuf's delimited form, on a Unix stream socket.
type socketConn struct {
	conn net.Conn
	r    *bufio.Reader
	buf  []byte
}

// dialCycleSocket connects to the sidecar's cycle socket at path; the
// connection closes when ctx ends (the stream's cancel).
func dialCycleSocket(path string) func(ctx context.Context) (cycleConn, error) {
	return func(ctx context.Context) (cycleConn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "unix", path)
		if err != nil {
			return nil, err
		}
		context.AfterFunc(ctx, func() { conn.Close() })
		return &socketConn{conn: conn, r: bufio.NewReader(conn)}, nil
	}
}

// Send writes req in one write: its length, then its bytes.
func (s *socketConn) Send(req *pb.CycleRequest) error {
	frame := protowire.AppendVarint(s.buf[:0], uint64(proto.Size(req)))
	frame, err := proto.MarshalOptions{UseCachedSize: true}.MarshalAppend(frame, req)
	if err != nil {
		return err
	}
	s.buf = frame
	_, err = s.conn.Write(frame)
	return err
}

// Recv reads one reply. A refusal (refused_code) becomes its gRPC status error,
// as a gRPC stream that the sidecar ended with it.
func (s *socketConn) Recv() (*pb.CycleResponse, error) {
	n, err := binary.ReadUvarint(s.r) // io.EOF: the sidecar closed it between messages
	if err != nil {
		return nil, err
	}
	if n > maxCycleMessage {
		return nil, status.Errorf(codes.ResourceExhausted, "a cycle socket reply of %d bytes", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(s.r, body); err != nil {
		return nil, err
	}
	reply := &pb.CycleResponse{}
	if err := proto.Unmarshal(body, reply); err != nil {
		return nil, status.Errorf(codes.Internal, "not a CycleResponse on the cycle socket: %v", err)
	}
	if c := reply.GetRefusedCode(); c != 0 {
		return nil, status.Error(codes.Code(c), reply.GetRefusedMessage())
	}
	return reply, nil
}

// cycleRetry is how long the shim makes unary calls after a sidecar answered
// Cycle with UNIMPLEMENTED (an older sidecar) before it tries the stream again
// (the sidecar may have been upgraded meanwhile).
const cycleRetry = 5 * time.Minute

// socketRetry is how long the shim uses the gRPC Cycle stream after the cycle
// socket could not be reached (a sidecar restarting, or one without the
// socket) before it dials the socket again: a failed dial of a Unix socket
// costs microseconds, and a restarted sidecar's socket is back in seconds.
const socketRetry = 10 * time.Second

// errNoCycle: the sidecar does not serve Cycle; make the unary call.
var errNoCycle = errors.New("the sidecar does not serve Cycle")

// cycleStream sends the scheduling cycle's two calls, Filter (at PreFilter)
// and Reserve, as messages on one long-lived Cycle stream: the sidecar spends
// far less CPU on a stream message than on a unary call (see CycleRequest in
// the proto). The stream is lock-step, one request and then its reply; the
// mutex keeps it so even if two goroutines ever called at once. Any error or
// a reply that does not come within the call's timeout closes the stream, and
// the next call opens a new one.
type cycleStream struct {
	mu   sync.Mutex
	open func(ctx context.Context) (cycleConn, error) // the gRPC Cycle stream
	// dial connects to the cycle socket (nil: none configured); tried before
	// the gRPC stream, unless it failed to connect less than socketRetry ago
	dial       func(ctx context.Context) (cycleConn, error)
	socketPath string
	grpcUntil  time.Time
	base       context.Context // the stream lives until this ends (the plugin's)
	now        func() time.Time
	stream     cycleConn
	cancel     context.CancelFunc // ends stream
	seq        uint64
	// unary until then: the sidecar answered UNIMPLEMENTED
	unaryUntil time.Time
}

// newCycleStream sends the cycle's calls on the gRPC Cycle stream, or with
// socket set on the sidecar's cycle socket at that path (the same messages
// without gRPC: far less CPU and fewer thread wake-ups on both sides).
func newCycleStream(base context.Context, client pb.SchedulerClient, socket string) *cycleStream {
	c := &cycleStream{
		open: func(ctx context.Context) (cycleConn, error) { return client.Cycle(ctx) },
		base: base,
		now:  time.Now,
	}
	if socket != "" {
		c.dial, c.socketPath = dialCycleSocket(socket), socket
	}
	return c
}

// connect opens the cycle socket when there is one (falling back to the gRPC
// stream for socketRetry when it cannot be reached), else the gRPC stream.
func (c *cycleStream) connect(ctx context.Context) (cycleConn, error) {
	if c.dial != nil && !c.now().Before(c.grpcUntil) {
		conn, err := c.dial(ctx)
		if err == nil {
			return conn, nil
		}
		c.grpcUntil = c.now().Add(socketRetry)
		klog.FromContext(ctx).Info("pyextender: the sidecar's cycle socket cannot be reached; "+
			"using the gRPC Cycle stream meanwhile", "socket", c.socketPath, "retryIn", socketRetry, "err", err)
	}
	return c.open(ctx)
}

// exchange sends req and waits for its reply, at most until ctx's deadline
// (else timeout). errNoCycle: make the unary call instead.
func (c *cycleStream) exchange(ctx context.Context, req *pb.CycleRequest, timeout time.Duration) (*pb.CycleResponse, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now().Before(c.unaryUntil) {
		return nil, errNoCycle
	}
	if deadline, ok := ctx.Deadline(); ok {
		timeout = time.Until(deadline)
	}
	if timeout <= 0 {
		return nil, status.Error(codes.DeadlineExceeded, "no time left for the call")
	}
	if c.stream == nil {
		sctx, cancel := context.WithCancel(c.base)
		s, err := c.connect(sctx)
		if err != nil {
			cancel()
			return nil, err
		}
		c.stream, c.cancel = s, cancel
	}
	c.seq++
	req.Seq = c.seq
	req.TimeoutMs = uint32(min(timeout.Milliseconds(), int64(^uint32(0))))
	// a reply that does not come in time (or a cycle that ends first) ends the stream
	var late atomic.Bool
	cancel := c.cancel
	timer := time.AfterFunc(timeout, func() { late.Store(true); cancel() })
	stop := context.AfterFunc(ctx, cancel)
	err := c.stream.Send(req)
	var reply *pb.CycleResponse
	if err == nil || errors.Is(err, io.EOF) {
		// io.EOF from Send: the sidecar ended the stream; Recv says why
		reply, err = c.stream.Recv()
	}
	timer.Stop()
	stop()
	switch {
	case err != nil && (late.Load() || errors.Is(ctx.Err(), context.DeadlineExceeded)):
		err = status.Errorf(codes.DeadlineExceeded, "no reply on the Cycle stream within %v", timeout)
	case err == nil && reply.GetSeq() != req.Seq:
		err = status.Errorf(codes.Internal, "the Cycle stream answered request %d to request %d", reply.GetSeq(), req.Seq)
	}
	if err != nil {
		c.cancel()
		c.stream, c.cancel = nil, nil
		if status.Code(err) == codes.Unimplemented {
			c.unaryUntil = c.now().Add(cycleRetry)
			return nil, errNoCycle
		}
		return nil, err
	}
	return reply, nil
}

// close ends the open stream, if any (the plugin's Close).
func (c *cycleStream) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		c.cancel()
		c.stream, c.cancel = nil, nil
	}
}

// onCycle sends req on the Cycle stream and takes its reply with get; without
// a stream (none, or a sidecar without Cycle) it makes the unary call.
func onCycle[R any](ctx context.Context, p *Pyextender, what string, req *pb.CycleRequest,
	get func(*pb.CycleResponse) (R, bool), unary func() (R, error)) (R, error) {
	var zero R
	if p.cycle != nil {
		reply, err := p.cycle.exchange(ctx, req, p.timeout)
		if err == nil {
			if r, ok := get(reply); ok {
				return r, nil
			}
			return zero, fmt.Errorf("the Cycle stream answered a %s with %T", what, reply.GetReply())
		}
		if !errors.Is(err, errNoCycle) {
			return zero, err
		}
	}
	return unary()
}

// filter asks Filter on the stream, or by a unary call when there is none.
func (p *Pyextender) filter(ctx context.Context, req *pb.FilterRequest) (*pb.FilterResponse, error) {
	return onCycle(ctx, p, "Filter", &pb.CycleRequest{Call: &pb.CycleRequest_Filter{Filter: req}},
		func(r *pb.CycleResponse) (*pb.FilterResponse, bool) { f := r.GetFilter(); return f, f != nil },
		func() (*pb.FilterResponse, error) { return p.client.Filter(ctx, req) })
}

// reserve asks Reserve on the stream, or by a unary call when there is none.
func (p *Pyextender) reserve(ctx context.Context, req *pb.ReserveRequest) (*pb.ReserveResponse, error) {
	return onCycle(ctx, p, "Reserve", &pb.CycleRequest{Call: &pb.CycleRequest_Reserve{Reserve: req}},
		func(r *pb.CycleResponse) (*pb.ReserveResponse, bool) { f := r.GetReserve(); return f, f != nil },
		func() (*pb.ReserveResponse, error) { return p.client.Reserve(ctx, req) })
}
