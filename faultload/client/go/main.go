// faultload-client: the raw load client compiled, one process per load worker.
//
// It speaks faultload/client/raw.py's protocol exactly (the tinker SDK's submit and poll rules, as the spec's
// rules state them) and writes the same per-request history, so every checker reads it unchanged. Why a
// second implementation: the client is harness, and on a 2-core machine each millisecond of its CPU is taken
// from the server it judges; the Python client spends about 0.45 ms per request at a burst (README,
// "Benchmarks"). The Python worker starts it (faultload/client/compiled.py) and talks over stdin/stdout:
//
//	stdin  line 1: the spec (JSON, faultload/client/compiled_spec.py)   stdout: READY <cpu s> (or one stderr line, exit 2)
//	stdin  GO <t0>: run, t0 on CLOCK_MONOTONIC (Python's time.monotonic)
//	stdin  STOP, or end of input: stop     stdout: DONE once the history is in out_dir (exit 0)
//
// `faultload-client vectors` runs the wire package's test vectors instead (tests/unit/test_compiled_wire.py).
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"faultload/client/wire"
)

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "faultload-client: error: "+format+"\n", args...)
	os.Exit(code)
}

// monotonic is CLOCK_MONOTONIC in seconds, the clock of Python's time.monotonic(): t0 is the parent's.
func monotonic() float64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

// cpuSeconds is this process's user + system CPU so far (getrusage: finer than /proc's clock ticks).
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func main() {
	// Harness: one core's worth, as the Python worker's one process, and a collector that runs a fifth as
	// often (the live heap is the history and the requests in flight), as the compiled router.
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(500)
	}
	// The trial decides when a load client stops (STOP, or its stdin closed): a terminal's Ctrl-C or hang-up,
	// sent to the whole foreground group, must not end it with its history unwritten.
	signal.Ignore(syscall.SIGINT, syscall.SIGHUP)
	if len(os.Args) == 2 && os.Args[1] == "vectors" {
		if err := wire.RunVectors(os.Stdin, os.Stdout); err != nil {
			fail(1, "vectors: %v", err)
		}
		return
	}
	if len(os.Args) > 1 {
		fail(2, "unrecognized arguments: %v (the spec comes on stdin)", os.Args[1:])
	}
	in := bufio.NewReaderSize(os.Stdin, 64<<10)
	line, err := in.ReadBytes('\n')
	if err != nil {
		fail(2, "no spec on stdin: %v", err)
	}
	s, err := parseSpec(line)
	if err != nil {
		fail(2, "%v", err)
	}
	c, arrivals := prepare(s)
	fmt.Printf("READY %.6f\n", cpuSeconds()) // its CPU before the load: the trial counts it as start-up
	go_, err := in.ReadString('\n')
	if err != nil {
		return // the parent ended before the start: nothing ran, nothing to hand back
	}
	t0, err := strconv.ParseFloat(strings.TrimPrefix(strings.TrimSpace(go_), "GO "), 64)
	if err != nil || !strings.HasPrefix(go_, "GO ") {
		fail(2, "expected GO <t0>, got %q", strings.TrimSpace(go_))
	}
	c.t0 = t0
	c.run(stopOnInput(in), arrivals)
	if err := handBack(c); err != nil {
		fail(1, "writing the history to %s: %v", s.OutDir, err)
	}
	fmt.Println("DONE")
}

// prepare is everything before the clock starts: the counters mapped, the arrivals read, the pool set up.
func prepare(s *spec) (*client, []float64) {
	ctr, err := openCounters(s.CountersPath)
	if err != nil {
		fail(2, "counters: %v", err)
	}
	arrivals, err := s.arrivals()
	if err != nil {
		fail(2, "%v", err)
	}
	c, err := newClient(s, newHistory(s.Count, s.Worker), ctr, 0)
	if err != nil {
		fail(2, "%v", err)
	}
	return c, arrivals
}

// stopOnInput closes when the parent says STOP or its end of the pipe closes (it died: a Ray actor's
// thread or a killed worker leaves no signal to follow).
func stopOnInput(in *bufio.Reader) <-chan struct{} {
	stop := make(chan struct{})
	go func() {
		for {
			line, err := in.ReadString('\n')
			if err != nil || strings.TrimSpace(line) == "STOP" {
				close(stop)
				return
			}
		}
	}()
	return stop
}

func handBack(c *client) error {
	if err := c.h.save(c.s.OutDir); err != nil {
		return err
	}
	result, _ := json.Marshal(map[string]any{
		"crashed":          c.crashed,
		"connections_made": c.pool.made.Load(),
		"peak_live":        c.pool.peak.Load(),
	})
	return os.WriteFile(filepath.Join(c.s.OutDir, "result.json"), result, 0o600)
}
