package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "pyextender.io/shim/gen/pyextender/v1"
)

// cycleRetry is how long the shim makes unary calls after a sidecar answered
// Cycle with UNIMPLEMENTED (an older sidecar) before it tries the stream again
// (the sidecar may have been upgraded meanwhile).
const cycleRetry = 5 * time.Minute

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
	mu     sync.Mutex
	open   func(ctx context.Context) (pb.Scheduler_CycleClient, error)
	base   context.Context // the stream lives until this ends (the plugin's)
	now    func() time.Time
	stream pb.Scheduler_CycleClient
	cancel context.CancelFunc // ends stream
	seq    uint64
	// unary until then: the sidecar answered UNIMPLEMENTED
	unaryUntil time.Time
}

func newCycleStream(base context.Context, client pb.SchedulerClient) *cycleStream {
	return &cycleStream{
		open: func(ctx context.Context) (pb.Scheduler_CycleClient, error) { return client.Cycle(ctx) },
		base: base,
		now:  time.Now,
	}
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
		s, err := c.open(sctx)
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
