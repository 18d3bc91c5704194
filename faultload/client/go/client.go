package main

import (
	"fmt"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"faultload/client/wire"
)

// client runs one worker's share of a trial, as faultload/client/raw.py's RawClient.run: a feeder starts each
// request when its arrival time has come and an outstanding slot is free; everything ends when every request
// has, the deadline comes, or the parent says stop. Waits that the end cuts unwind (errStopped): an attempt
// in flight then gets no attempt row, as a cancelled asyncio task gets none.
type client struct {
	s           *spec
	t0          float64
	h           *history
	ctr         *counters
	pool        *pool
	stop        chan struct{} // closed once: the parent's STOP, the deadline, or a crash
	stopOnce    sync.Once
	outstanding chan struct{} // nil: no cap
	submit      chan struct{} // Go queues a channel's blocked senders in order, as asyncio's FIFO Semaphore
	checkers    sync.Pool
	sampleHead  []byte
	pollHead    []byte
	jsonHeaders []byte
	pollHeaders []byte
	wg          sync.WaitGroup
	crashMu     sync.Mutex
	crashed     string
}

func newClient(s *spec, h *history, ctr *counters, t0 float64) (*client, error) {
	c := &client{s: s, t0: t0, h: h, ctr: ctr, stop: make(chan struct{}), submit: make(chan struct{}, s.Submit)}
	if s.Outstanding > 0 {
		c.outstanding = make(chan struct{}, s.Outstanding)
	}
	p, err := newPool(s, c.now)
	if err != nil {
		return nil, err
	}
	c.pool = p
	c.checkers.New = func() any { return wire.NewChecker(s.NumSamples, s.ResultTokens, s.PromptExtra) }
	c.sampleHead = []byte("POST " + s.Prefix + "/api/v1/asample HTTP/1.1\r\n")
	c.pollHead = []byte("POST " + s.Prefix + "/api/v1/retrieve_future HTTP/1.1\r\n")
	c.jsonHeaders = latin1(s.Headers)
	c.pollHeaders = append([]byte("Accept: "+s.Accept+"\r\n"), c.jsonHeaders...)
	return c, nil
}

func (c *client) now() float64 { return monotonic() - c.t0 }

func (c *client) end() { c.stopOnce.Do(func() { close(c.stop) }) }

// sleep waits in trial seconds, unwinding the request if the run ends meanwhile.
func (c *client) sleep(seconds float64) {
	if seconds <= 0 {
		return
	}
	t := time.NewTimer(time.Duration(seconds * float64(time.Second)))
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.stop:
		panic(errStopped{})
	}
}

func (c *client) acquire(slots chan struct{}) {
	select {
	case slots <- struct{}{}:
	case <-c.stop:
		panic(errStopped{})
	}
}

// stopped unwinds the request when its exchange was cut by the end of the run.
func (c *client) stopped(a answer) {
	if a.err != nil && a.err.kind == "cancelled" {
		select {
		case <-c.stop:
			panic(errStopped{})
		default:
		}
	}
}

// guard turns a goroutine's bug into the run's crash (its history kept), and a stop into a quiet return.
func (c *client) guard() {
	r := recover()
	if r == nil {
		return
	}
	if _, ok := r.(errStopped); ok {
		return
	}
	c.crashMu.Lock()
	if c.crashed == "" {
		c.crashed = fmt.Sprintf("%v\n%s", r, debug.Stack())
	}
	c.crashMu.Unlock()
	c.end()
}

// run starts the requests and returns when they are done, the deadline has come, or stopRequested closes.
func (c *client) run(stopRequested <-chan struct{}, arrivals []float64) {
	settled := make(chan struct{})
	go c.feed(arrivals, settled)
	tick := time.NewTicker(time.Duration(c.s.StopCheckS * float64(time.Second)))
	defer tick.Stop()
	for waiting := true; waiting; {
		left := c.s.DeadlineS - c.now()
		deadline := time.NewTimer(time.Duration(max(left, 0) * float64(time.Second)))
		select {
		case <-settled:
			waiting = false
		case <-stopRequested:
			waiting = false
		case <-c.stop:
			waiting = false
		case <-deadline.C:
			waiting = false
		case <-tick.C:
			c.ctr.set(ctrConnectionsPeak, c.pool.peak.Load())
		}
		deadline.Stop()
	}
	c.end()
	c.ctr.set(ctrConnectionsPeak, c.pool.peak.Load())
	c.pool.closeAll()
	c.wait(5 * time.Second)
}

// feed starts each request in order; settled closes when every started request has ended and none is left.
func (c *client) feed(arrivals []float64, settled chan struct{}) {
	c.wg.Add(1) // the feeder itself: settled cannot close before it has started every request
	go func() { c.wg.Wait(); close(settled) }()
	defer c.wg.Done()
	defer c.guard()
	for row := 0; row < c.s.Count; row++ {
		if arrivals != nil && arrivals[row] > c.now() {
			c.sleep(arrivals[row] - c.now())
		}
		if c.outstanding != nil {
			c.acquire(c.outstanding)
		}
		c.wg.Add(1)
		go func(row int) {
			defer c.wg.Done()
			if c.outstanding != nil {
				defer func() { <-c.outstanding }()
			}
			defer c.guard()
			c.one(row)
		}(row)
	}
}

// wait gives the unwinding requests a bounded time to leave their rows alone before the history is written.
func (c *client) wait(limit time.Duration) {
	done := make(chan struct{})
	go func() { c.wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(limit):
	}
}

// pyBytesRepr is Python's repr() of payload[:n] (bytes): the examples quote a server's answer as the
// Python client does.
func pyBytesRepr(payload []byte, n int) string {
	if len(payload) > n {
		payload = payload[:n]
	}
	quote := byte('\'')
	if strings.IndexByte(string(payload), '\'') >= 0 && strings.IndexByte(string(payload), '"') < 0 {
		quote = '"'
	}
	var b strings.Builder
	b.WriteString("b")
	b.WriteByte(quote)
	for _, ch := range payload {
		switch {
		case ch == quote || ch == '\\':
			b.WriteByte('\\')
			b.WriteByte(ch)
		case ch == '\t':
			b.WriteString(`\t`)
		case ch == '\n':
			b.WriteString(`\n`)
		case ch == '\r':
			b.WriteString(`\r`)
		case ch < 0x20 || ch >= 0x7f:
			fmt.Fprintf(&b, `\x%02x`, ch)
		default:
			b.WriteByte(ch)
		}
	}
	b.WriteByte(quote)
	return b.String()
}

// merged closes when either channel does (a poll cut by the run's end, or dropped on purpose).
func merged(a, b <-chan struct{}) <-chan struct{} {
	out := make(chan struct{})
	go func() {
		select {
		case <-a:
		case <-b:
		}
		close(out)
	}()
	return out
}

// latin1 is the header block as the Python client encodes it: each character one byte (the spec carries it
// as JSON text, whose characters above 127 Go would otherwise write as UTF-8).
func latin1(text string) []byte {
	out := make([]byte, 0, len(text))
	for _, r := range text {
		out = append(out, byte(r))
	}
	return out
}
