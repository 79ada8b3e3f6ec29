package plugin

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/klog/v2"
)

// A gang waits in Permit while it makes progress, not for a fixed time from its
// first member: kube-scheduler brings ~15-20 pods/s to Permit, so a gang of
// 1,000 needs about a minute to assemble, far more than any sensible "the gang
// is stuck" timeout. Each member the sidecar tells to wait restarts its gang's
// stall window (the reply's timeout, the sidecar's --gang-timeout); a watchdog
// rejects every waiting member of a gang once no new member has arrived for
// that long, or once the gang has waited its cap (the reply's max_wait) since
// its first member arrived. The framework's own per-pod Permit timeout is set
// a little beyond the cap, as a backstop only.

const (
	// watchPeriod is how often the watchdog looks for stalled gangs: a gang is
	// rejected at most this late.
	watchPeriod = time.Second
	// frameworkMaxWait is kube-scheduler's own cap on a Permit wait (maxTimeout
	// in pkg/scheduler/framework/runtime): a longer timeout is cut to it.
	frameworkMaxWait = 15 * time.Minute
)

// gangWait is one gang's current wait in Permit.
type gangWait struct {
	first, last      time.Time     // arrival of the first and of the latest waiting member
	stall, limit     time.Duration // the stall window and the cap, from the latest reply
	ready, minMember int32         // the sidecar's count at the latest arrival
}

// gangWaits tracks the gangs waiting in Permit; safe for concurrent use.
type gangWaits struct {
	mu    sync.Mutex
	now   func() time.Time
	gangs map[string]*gangWait
}

func newGangWaits(now func() time.Time) *gangWaits {
	return &gangWaits{now: now, gangs: map[string]*gangWait{}}
}

// arrive records that a member of `gang` reached Permit and was told to wait
// (stall > 0; limit <= 0 means "no cap beyond the stall window", an older
// sidecar). It returns the framework timeout for the member: the cap plus a
// margin for the watchdog's period, at most kube-scheduler's maximum.
func (g *gangWaits) arrive(gang string, stall, limit time.Duration, ready, minMember int32) time.Duration {
	if limit <= 0 {
		limit = stall
	}
	limit = min(limit, frameworkMaxWait)
	now := g.now()
	g.mu.Lock()
	w := g.gangs[gang]
	if w == nil {
		w = &gangWait{first: now}
		g.gangs[gang] = w
	}
	w.last, w.stall, w.limit, w.ready, w.minMember = now, stall, limit, ready, minMember
	g.mu.Unlock()
	return min(limit+2*watchPeriod, frameworkMaxWait)
}

// end forgets the wait of `gang`: it was allowed, or its waiting members were
// rejected (a member was unreserved or timed out). Its next member starts a new wait.
func (g *gangWaits) end(gang string) {
	g.mu.Lock()
	delete(g.gangs, gang)
	g.mu.Unlock()
}

// expiry is a gang whose wait is over, and why (counts filled in by the caller).
type expiry struct {
	gang   string
	wait   gangWait
	capped bool // the cap was reached; otherwise the gang stalled
}

// expired removes and returns the gangs that stalled or reached their cap by now.
func (g *gangWaits) expired() []expiry {
	now := g.now()
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []expiry
	for gang, w := range g.gangs {
		capped := now.Sub(w.first) >= w.limit
		if capped || now.Sub(w.last) >= w.stall {
			out = append(out, expiry{gang: gang, wait: *w, capped: capped})
			delete(g.gangs, gang)
		}
	}
	return out
}

// message is what each rejected member (and its PodGroup's events) says.
func (e expiry) message(now time.Time, waiting int) string {
	w := e.wait
	counts := fmt.Sprintf("%d members waiting in Permit, %d/%d of minMember ready", waiting, w.ready, w.minMember)
	sinceLast := now.Sub(w.last).Round(time.Second)
	if e.capped {
		return fmt.Sprintf("gang %s: waited %s in Permit, the cap (last new member %s ago); %s; rejecting them all so kube-scheduler retries the gang",
			e.gang, now.Sub(w.first).Round(time.Second), sinceLast, counts)
	}
	return fmt.Sprintf("gang %s: no new member reached Permit for %s (stall window %s, waited %s in all); %s; rejecting them all so kube-scheduler retries the gang",
		e.gang, sinceLast, w.stall, now.Sub(w.first).Round(time.Second), counts)
}

// rejectExpired rejects every waiting member of each gang that stalled or
// reached its cap; returns how many pods it rejected.
func (p *Pyextender) rejectExpired(logger klog.Logger) int {
	total := 0
	for _, e := range p.gangWaits.expired() {
		msg := e.message(p.gangWaits.now(), len(waitingMembers(p.waiting, e.gang, "")))
		n := rejectGang(p.waiting, e.gang, Name, msg)
		if n > 0 {
			logger.Info("pyextender: rejected a waiting gang", "gang", e.gang, "count", n, "reason", msg)
		}
		total += n
	}
	return total
}

// startWatchdog runs rejectExpired every `period` until ctx is done or Close is
// called; the channel it returns is closed once the watchdog has stopped.
func (p *Pyextender) startWatchdog(ctx context.Context, period time.Duration) <-chan struct{} {
	stop, stopped := make(chan struct{}), make(chan struct{})
	p.stopWatchdog = sync.OnceFunc(func() {
		close(stop)
		<-stopped
	})
	logger := klog.FromContext(ctx)
	go func() {
		defer close(stopped)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stop:
				return
			case <-tick.C:
				p.rejectExpired(logger)
			}
		}
	}()
	return stopped
}

// Close implements io.Closer (the framework calls it when the profile is
// torn down): stops the watchdog and the released-pods stream (released.go)
// and waits until both have stopped.
func (p *Pyextender) Close() error {
	if p.stopWatchdog != nil {
		p.stopWatchdog()
	}
	if p.stopReleased != nil {
		p.stopReleased()
	}
	if p.cycle != nil {
		p.cycle.close()
	}
	return nil
}
