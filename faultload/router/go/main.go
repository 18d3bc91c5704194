// faultload-router: the fake vLLM router compiled, for one process (`--procs 1`).
//
// It takes the flags of `python -m faultload.router` and answers as it does (the routes, modes, fault
// windows, /stats, SIGUSR1 and the completion log are specified in faultload/router/__init__.py). Why
// a second implementation: the router is harness, and every millisecond of its CPU is one the server
// under test does not get; the Python router spends ~150-180 us of CPU per completion, most of it its
// HTTP server, asyncio and the interpreter (bench/router_cpu.py). `--procs N > 1` stays with the
// Python router, whose processes share their state in fork-inherited memory.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"time"
)

const (
	shutdownS  = 1.0
	keepaliveS = 75.0
)

type config struct {
	mode           string
	barrier        int64
	barrierTimeout float64
	maxNumSeqs     int64
	genSeconds     float64
	procs          int
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "faultload-router: error: "+format+"\n", args...)
	os.Exit(code)
}

func parseFlags(argv []string) (config, string, int, string) {
	fs := flag.NewFlagSet("faultload-router", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	host := fs.String("host", "127.0.0.1", "")
	port := fs.Int("port", 0, "")
	mode := fs.String("mode", "latency", "")
	barrier := fs.Int64("barrier", 0, "")
	barrierTimeout := fs.Float64("barrier-timeout", 60.0, "")
	maxNumSeqs := fs.Int64("max-num-seqs", 256, "")
	genSeconds := fs.Float64("gen-seconds", 1.0, "")
	procs := fs.Int("procs", 1, "")
	completionsDir := fs.String("completions-dir", "", "")
	if err := fs.Parse(argv); err != nil {
		fail(2, "%v", err)
	}
	if fs.NArg() > 0 {
		fail(2, "unrecognized arguments: %v", fs.Args())
	}
	cfg := config{*mode, *barrier, *barrierTimeout, *maxNumSeqs, *genSeconds, *procs}
	switch {
	case cfg.mode != "barrier" && cfg.mode != "latency" && cfg.mode != "immediate":
		fail(2, "--mode: must be one of barrier, latency, immediate (got %q)", cfg.mode)
	case cfg.barrier < 0 || cfg.barrier > 1_000_000 || (cfg.mode == "barrier" && cfg.barrier < 1):
		fail(2, "--barrier: must be in [1, 1000000] in barrier mode, [0, 1000000] otherwise (got %d)", cfg.barrier)
	case !(cfg.barrierTimeout > 0 && cfg.barrierTimeout <= maxFaultS):
		fail(2, "--barrier-timeout: must be in (0, %g] (got %g)", maxFaultS, cfg.barrierTimeout)
	case cfg.maxNumSeqs < 1 || cfg.maxNumSeqs > 1_000_000:
		fail(2, "--max-num-seqs: must be in [1, 1000000] (got %d)", cfg.maxNumSeqs)
	case !(cfg.genSeconds >= 0 && cfg.genSeconds <= 3600) || math.IsNaN(cfg.genSeconds):
		fail(2, "--gen-seconds: must be in [0, 3600] (got %g)", cfg.genSeconds)
	case cfg.procs != 1:
		fail(2, "--procs: must be 1 (got %d); more processes are the Python router's (python -m faultload.router)", cfg.procs)
	case *port < 0 || *port > 65535:
		fail(2, "--port: must be in [0, 65535] (got %d)", *port)
	}
	return cfg, *host, *port, *completionsDir
}

// conns tracks each connection's state so SIGUSR1 can close the idle ones.
type conns struct {
	mu    sync.Mutex
	state map[net.Conn]http.ConnState
}

func (c *conns) track(conn net.Conn, st http.ConnState) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st == http.StateClosed || st == http.StateHijacked {
		delete(c.state, conn)
	} else {
		c.state[conn] = st
	}
}

// closeIdle closes every keep-alive connection between requests: the router's idle timeout running out at
// once. A connection just accepted (StateNew) stays: its first request may be in the socket, not yet read.
func (c *conns) closeIdle() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for conn, st := range c.state {
		if st == http.StateIdle {
			conn.Close()
		}
	}
}

func main() {
	cfg, host, port, completionsDir := parseFlags(os.Args[1:])
	// The router is harness: one core's worth, as the Python router's one process, and a garbage collector
	// that runs a fifth as often (the live heap is a few MB). Measured in the README's "Benchmarks".
	if os.Getenv("GOMAXPROCS") == "" { // the environment's, when set, as for any Go program
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(500)
	}
	signal.Ignore(syscall.SIGUSR1) // until the server listens: one sent before has nothing to close
	a := &app{cfg: cfg, s: newState(cfg.barrier, cfg.barrierTimeout, cfg.maxNumSeqs), pid: strconv.Itoa(os.Getpid())}
	if completionsDir != "" {
		path := filepath.Join(completionsDir, fmt.Sprintf("completions-%d.bin", os.Getpid()))
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			fail(1, "cannot open the completion log: %v", err)
		}
		a.completions = f
	}
	// No TCP keep-alive probes on accepted connections (the Python router sets none either): Go's default
	// costs four setsockopt calls per connection, and 0.4.0's forwarding pool opens one for most forwards.
	lc := net.ListenConfig{KeepAlive: -1}
	ln, err := lc.Listen(context.Background(), "tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		fail(1, "cannot serve on %s:%d: %v", host, port, err)
	}
	tracked := &conns{state: map[net.Conn]http.ConnState{}}
	srv := &http.Server{Handler: a, IdleTimeout: keepaliveS * time.Second, ConnState: tracked.track,
		ReadHeaderTimeout: 0, MaxHeaderBytes: 1 << 20}
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	usr1 := make(chan os.Signal, 16)
	signal.Notify(usr1, syscall.SIGUSR1)
	go func() {
		for range usr1 {
			if a.s.inFlight() == 0 {
				tracked.closeIdle()
			}
		}
	}()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	a.s.add(&a.s.procsReady, 1)
	fmt.Fprintf(os.Stdout, "READY %d\n", ln.Addr().(*net.TCPAddr).Port)
	select {
	case <-stop:
	case err := <-served:
		fail(1, "serving stopped: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(shutdownS*float64(time.Second)))
	defer cancel()
	if srv.Shutdown(ctx) != nil {
		srv.Close() // handlers still running after the grace: their requests are cut
	}
}
