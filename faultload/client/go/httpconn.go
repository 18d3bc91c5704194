package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"time"
)

// The Python pool's error types (faultload/client/http_conn.py): their names are the examples' words, and
// each maps to the history's error class as faultload/client/endpoint.py classify_error does.
type httpError struct {
	kind string // ConnectError, ConnectTimeout, ResetError, HttpTimeout, ProtocolError
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func (e *httpError) class() errorClass {
	switch e.kind {
	case "HttpTimeout", "ConnectTimeout":
		return errTimeout
	case "ConnectError":
		return errConnect
	case "ResetError":
		return errReset
	case "ProtocolError":
		return errDecode
	}
	return errOther
}

var errCancelled = errors.New("cancelled")

const (
	connIdle = iota
	connBusy
	connDead
)

// answer is one exchange's outcome, handed from the connection's reader to the request waiting on it.
type answer struct {
	status int
	ctype  string
	body   []byte
	keep   bool
	err    *httpError
}

// conn is one keep-alive connection with at most one request in flight. Its reader goroutine stays blocked
// in a read while no request is pending, so a FIN or stray bytes then mark it dead at once, as the Python
// pool's protocol does (a reused connection the server had closed would otherwise be a reset). Every pending
// request gets exactly one answer from the reader.
type conn struct {
	nc        net.Conn
	br        *bufio.Reader
	mu        sync.Mutex
	state     int
	pending   bool
	reused    bool
	done      chan answer
	idleSince float64
	pool      *pool
}

func newConn(p *pool, nc net.Conn) *conn {
	c := &conn{nc: nc, br: bufio.NewReaderSize(nc, 16<<10), state: connBusy, done: make(chan answer, 1), pool: p}
	go c.read()
	return c
}

// read answers each request written on the connection, and between requests watches it for the server's
// close; it ends when the connection does.
func (c *conn) read() {
	defer c.pool.forget()
	for {
		c.br.Peek(1) // bytes, EOF or an error: what they mean depends on whether a request is pending
		c.mu.Lock()
		if !c.pending {
			c.state = connDead // closed or spoken to with nothing asked: never reused
			c.mu.Unlock()
			c.nc.Close()
			return
		}
		c.mu.Unlock()
		a := c.exchange()
		c.mu.Lock()
		c.pending = false
		if a.err != nil || !a.keep {
			c.state = connDead
		}
		dead := c.state == connDead
		c.mu.Unlock()
		if dead {
			c.nc.Close()
		} else {
			c.nc.SetDeadline(time.Time{}) // cleared before the answer goes back: the next request sets its own
		}
		c.done <- a
		if dead {
			return
		}
	}
}

// exchange reads one response (1xx skipped), its body whole.
func (c *conn) exchange() answer {
	for {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			return answer{err: c.readError(err, false)}
		}
		if resp.StatusCode < 200 {
			resp.Body.Close()
			continue
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			return answer{err: c.readError(err, true)}
		}
		ctype := ""
		if values := resp.Header["Content-Type"]; len(values) > 0 {
			ctype = values[len(values)-1] // as the Python pool: the last one wins
		}
		return answer{status: resp.StatusCode, ctype: ctype, body: body, keep: !resp.Close}
	}
}

func (c *conn) readError(err error, gotHead bool) *httpError {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		return &httpError{"HttpTimeout", "request timed out"}
	case !gotHead && (errors.Is(err, io.EOF) || isReset(err)) && c.reused:
		return &httpError{"ResetError", "reused keep-alive connection closed before any response byte"}
	case !gotHead && (errors.Is(err, io.EOF) || isReset(err)):
		return &httpError{"ResetError", "connection closed before any response byte"}
	case errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || isReset(err):
		return &httpError{"ResetError", "connection closed mid-response (incomplete body): " + err.Error()}
	}
	return &httpError{"ProtocolError", "bad HTTP response: " + err.Error()}
}

// isReset: an error from the socket itself (ECONNRESET, EPIPE, a closed connection), not from the bytes.
func isReset(err error) bool {
	var op *net.OpError
	if errors.As(err, &op) {
		var se *os.SyscallError
		return errors.As(op.Err, &se) || errors.Is(err, net.ErrClosed)
	}
	return false
}

// post writes one request on the connection and waits for its answer, or for cancel (which aborts the
// connection, so the server sees the client go away). The deadline bounds the write and the answer.
func (c *conn) post(data []byte, deadline time.Time, reused bool, cancel <-chan struct{}) answer {
	c.mu.Lock()
	if c.state == connDead {
		c.mu.Unlock()
		return answer{err: &httpError{"ResetError", "reused keep-alive connection closed before any response byte"}}
	}
	c.pending, c.reused = true, reused
	c.mu.Unlock()
	c.nc.SetDeadline(deadline)
	if _, err := c.nc.Write(data); err != nil {
		c.nc.Close() // the reader answers the pending request with the failure it then reads
	}
	select {
	case a := <-c.done:
		return a
	case <-cancel:
		c.mu.Lock()
		c.state = connDead
		c.mu.Unlock()
		c.nc.Close()
		return answer{err: &httpError{"cancelled", errCancelled.Error()}}
	}
}
