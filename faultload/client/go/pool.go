package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// pool is faultload/client/http.py's HttpPool: keep-alive POSTs to one host:port from one source address,
// idle connections on a LIFO stack closed once idle past the expiry (httpx's, the SDK's client), no
// connection limit (the request slots bound it), and no silent retry of a reused connection that failed.
type pool struct {
	addr     *net.TCPAddr
	host     string
	dialer   net.Dialer
	tls      *tls.Config
	expiry   float64 // trial seconds; <= 0: never
	connect  time.Duration
	mu       sync.Mutex
	idle     []*conn
	live     atomic.Int64
	peak     atomic.Int64
	made     atomic.Int64
	clock    func() float64
	hostLine []byte
}

func newPool(s *spec, clock func() float64) (*pool, error) {
	addr, err := net.ResolveTCPAddr("tcp", net.JoinHostPort(s.Host, strconv.Itoa(s.Port)))
	if err != nil {
		return nil, fmt.Errorf("cannot resolve %s:%d: %v", s.Host, s.Port, err)
	}
	p := &pool{addr: addr, host: s.Host, expiry: s.KeepaliveExpiryS, clock: clock,
		connect: time.Duration(s.ConnectTimeoutS * float64(time.Second))}
	authority := s.Host
	if net.ParseIP(s.Host) != nil && net.ParseIP(s.Host).To4() == nil {
		authority = "[" + s.Host + "]"
	}
	p.hostLine = []byte(fmt.Sprintf("Host: %s:%d\r\n", authority, s.Port))
	p.dialer.KeepAlive = -1 // no TCP keep-alive probes, as the Python pool
	if s.SourceIP != "" {
		ip := net.ParseIP(s.SourceIP)
		if ip == nil {
			return nil, fmt.Errorf("source_ip %q is not an address", s.SourceIP)
		}
		p.dialer.LocalAddr = &net.TCPAddr{IP: ip}
		p.dialer.Control = bindNoPort
	}
	if s.TLS != nil {
		if p.tls, err = tlsConfig(s.Host, s.TLS); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// bindNoPort leaves the port to connect, which picks it by the whole 4-tuple: a plain bind searches for a
// port no socket holds, TIME_WAIT ones included (bench/connect_cpu.py: 2.7-7.4 ms per connect, not 0.03).
func bindNoPort(_, _ string, raw syscall.RawConn) error {
	var err error
	raw.Control(func(fd uintptr) { err = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1) })
	return err
}

func tlsConfig(host string, t *tlsSpec) (*tls.Config, error) {
	cfg := &tls.Config{ServerName: host, InsecureSkipVerify: t.Insecure}
	if t.CACert != "" {
		pem, err := os.ReadFile(t.CACert)
		if err != nil {
			return nil, fmt.Errorf("ca_cert: %v", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ca_cert %s: no PEM certificate in it", t.CACert)
		}
	}
	return cfg, nil
}

// take is an idle connection (the most recent), the expired ones closed first; nil when none is left.
func (p *pool) take() *conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.expiry > 0 && len(p.idle) > 0 {
		cutoff, expired := p.clock()-p.expiry, 0
		for expired < len(p.idle) && p.idle[expired].idleSince < cutoff {
			p.idle[expired].abort()
			expired++
		}
		p.idle = p.idle[expired:]
	}
	for len(p.idle) > 0 {
		c := p.idle[len(p.idle)-1]
		p.idle = p.idle[:len(p.idle)-1]
		c.mu.Lock()
		usable := c.state == connIdle
		if usable {
			c.state = connBusy
		}
		c.mu.Unlock()
		if usable {
			return c
		}
	}
	return nil
}

// release puts a connection whose exchange ended well back on the stack.
func (p *pool) release(c *conn) {
	c.mu.Lock()
	dead := c.state == connDead
	if !dead {
		c.state, c.idleSince = connIdle, p.clock()
	}
	c.mu.Unlock()
	if dead {
		return
	}
	p.mu.Lock()
	p.idle = append(p.idle, c)
	p.mu.Unlock()
}

func (c *conn) abort() {
	c.mu.Lock()
	c.state = connDead
	c.mu.Unlock()
	c.nc.Close()
}

// dial opens a connection within min(connect timeout, what is left of the request's time).
func (p *pool) dial(deadline time.Time, cancel <-chan struct{}) (*conn, *httpError) {
	limit := min(p.connect, time.Until(deadline))
	ctx, stop := context.WithTimeout(context.Background(), max(limit, 0))
	defer stop()
	go func() {
		select {
		case <-cancel:
			stop()
		case <-ctx.Done():
		}
	}()
	nc, err := p.dialer.DialContext(ctx, "tcp", p.addr.String())
	if err == nil && p.tls != nil {
		tc := tls.Client(nc, p.tls)
		if err = tc.HandshakeContext(ctx); err != nil {
			nc.Close()
		}
		nc = tc
	}
	if err != nil {
		return nil, p.dialError(err, ctx, limit, cancel)
	}
	p.made.Add(1)
	if live := p.live.Add(1); live > p.peak.Load() {
		p.peak.Store(live)
	}
	return newConn(p, nc), nil
}

func (p *pool) dialError(err error, ctx context.Context, limit time.Duration, cancel <-chan struct{}) *httpError {
	select {
	case <-cancel:
		return &httpError{"cancelled", errCancelled.Error()}
	default:
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &httpError{"ConnectTimeout", fmt.Sprintf("connect to %s timed out after %.3gs", p.addr, limit.Seconds())}
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return &httpError{"ConnectError", fmt.Sprintf("[Errno %d] cannot connect to %s: %s", int(errno), p.addr, errno.Error())}
	}
	return &httpError{"ConnectError", fmt.Sprintf("cannot connect to %s: %v", p.addr, err)}
}

func (p *pool) forget() { p.live.Add(-1) }

// post is one POST: an idle connection or a new one, the request written whole, its answer read whole.
func (p *pool) post(head, headers, body []byte, timeout float64, cancel <-chan struct{}) answer {
	deadline := time.Now().Add(time.Duration(timeout * float64(time.Second)))
	data := make([]byte, 0, len(head)+len(p.hostLine)+len(headers)+len(body)+32)
	data = append(data, head...)
	data = append(data, p.hostLine...)
	data = append(data, headers...)
	data = append(data, "Content-Length: "...)
	data = strconv.AppendInt(data, int64(len(body)), 10)
	data = append(data, "\r\n\r\n"...)
	data = append(data, body...)
	c, reused := p.take(), true
	if c == nil {
		var err *httpError
		if c, err = p.dial(deadline, cancel); err != nil {
			return answer{err: err}
		}
		reused = false
	}
	a := c.post(data, deadline, reused, cancel)
	if a.err == nil && a.keep {
		p.release(c)
	}
	return a
}

// closeAll closes every connection, idle or not (the end of the run).
func (p *pool) closeAll() {
	p.mu.Lock()
	idle := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, c := range idle {
		c.abort()
	}
}
