package main

// The router's state: counters, fault windows, the barrier and the latency slots, under one lock
// (faultload/router/state.py's SharedState, Barrier and SlotPool for one process).

import (
	"context"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

type counters struct {
	Received       int64 `json:"received"`
	Completed      int64 `json:"completed"`
	Failed         int64 `json:"failed"`
	InFlight       int64 `json:"in_flight"`
	PeakInFlight   int64 `json:"peak_in_flight"`
	Held           int64 `json:"held"`
	ReleasedWaves  int64 `json:"released_waves"`
	BytesOut       int64 `json:"bytes_out"`
	Generating     int64 `json:"generating"`
	PeakGenerating int64 `json:"peak_generating"`
	Queued         int64 `json:"queued"`
	Stalled        int64 `json:"stalled"`
	Truncated      int64 `json:"truncated"`
	ErrorsInjected int64 `json:"errors_injected"`
	Cancelled      int64 `json:"cancelled"`
	BadRequests    int64 `json:"bad_requests"`
}

type faultsLeft struct {
	StallS       float64 `json:"stall_s"`
	ErrorsS      float64 `json:"errors_s"`
	ErrorsStatus int64   `json:"errors_status"`
	TruncateS    float64 `json:"truncate_s"`
}

type stats struct {
	counters
	ProcsReady int64      `json:"procs_ready"`
	Faults     faultsLeft `json:"faults"`
	Procs      int        `json:"procs"`
	Mode       string     `json:"mode"`
}

// monotonic is CLOCK_MONOTONIC in seconds, the clock of Python's time.monotonic(): a control call's
// until_monotonic deadline comes from the parent's.
func monotonic() float64 {
	var ts syscall.Timespec
	syscall.Syscall(syscall.SYS_CLOCK_GETTIME, 1, uintptr(unsafe.Pointer(&ts)), 0)
	return float64(ts.Sec) + float64(ts.Nsec)/1e9
}

type waiter struct {
	ch      chan struct{}
	granted bool
	gone    bool
}

type state struct {
	mu           sync.Mutex
	c            counters
	procsReady   int64
	errorsStatus int64
	windows      map[string]float64 // fault -> its end, monotonic seconds (0: none)

	// barrier mode
	barrierSize    int64
	barrierTimeout time.Duration
	wave           chan struct{} // closed when the current wave is released
	waveGen        int64         // bumped each time a wave's clock starts
	waveTimer      *time.Timer

	// latency mode
	slots int64
	queue []*waiter
}

// The faults the router times itself, each a window: faultload.model.fault_kinds' router-timed kinds, which a
// test holds this list to.
var timedFaults = []string{"stall", "errors", "truncate"}

func isTimedFault(name string) bool {
	for _, known := range timedFaults {
		if name == known {
			return true
		}
	}
	return false
}

func newState(barrier int64, barrierTimeout float64, slots int64) *state {
	windows := make(map[string]float64, len(timedFaults))
	for _, name := range timedFaults {
		windows[name] = 0
	}
	return &state{
		windows:        windows,
		barrierSize:    barrier,
		barrierTimeout: time.Duration(barrierTimeout * float64(time.Second)),
		slots:          slots,
	}
}

func (s *state) arrive() {
	s.mu.Lock()
	s.c.Received++
	s.c.InFlight++
	if s.c.InFlight > s.c.PeakInFlight {
		s.c.PeakInFlight = s.c.InFlight
	}
	s.mu.Unlock()
}

func (s *state) depart(completed bool, bytesOut int64) {
	s.mu.Lock()
	s.c.InFlight--
	if completed {
		s.c.Completed++
	} else {
		s.c.Failed++
	}
	s.c.BytesOut += bytesOut
	s.mu.Unlock()
}

func (s *state) add(field *int64, delta int64) {
	s.mu.Lock()
	*field += delta
	s.mu.Unlock()
}

func (s *state) inFlight() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.c.InFlight
}

// windowLeft is the seconds left in a fault window (<= 0: inactive).
func (s *state) windowLeft(name string) float64 {
	s.mu.Lock()
	end := s.windows[name]
	s.mu.Unlock()
	if end == 0 {
		return -1
	}
	return end - monotonic()
}

// setWindow opens a window of seconds from now, ending no later than until (when given).
func (s *state) setWindow(name string, seconds float64, until *float64) {
	now := monotonic()
	end := now + seconds
	if until != nil && *until < end {
		end = *until
	}
	if !(seconds > 0 && end > now) {
		end = 0
	}
	s.mu.Lock()
	s.windows[name] = end
	s.mu.Unlock()
}

func (s *state) snapshot(procs int, mode string) stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := monotonic()
	left := func(name string) float64 {
		if end := s.windows[name]; end > now {
			return end - now
		}
		return 0
	}
	return stats{counters: s.c, ProcsReady: s.procsReady, Procs: procs, Mode: mode,
		Faults: faultsLeft{left("stall"), left("errors"), s.errorsStatus, left("truncate")}}
}

// -- barrier: hold requests until barrierSize are held or the wave's first arrival is barrierTimeout old

func (s *state) releaseLocked() {
	s.c.Held = 0
	s.c.ReleasedWaves++
	if s.waveTimer != nil {
		s.waveTimer.Stop()
		s.waveTimer = nil
	}
	if s.wave != nil {
		close(s.wave)
		s.wave = nil
	}
}

// barrierWait joins the current wave and returns when it is released, or with ctx's error when the client
// left first (then it leaves the wave, whose clock keeps its first arrival's time).
func (s *state) barrierWait(ctx context.Context) error {
	s.mu.Lock()
	wave := s.c.ReleasedWaves
	s.c.Held++
	if s.c.Held == 1 {
		s.wave = make(chan struct{})
		s.waveGen++
		gen := s.waveGen
		s.waveTimer = time.AfterFunc(s.barrierTimeout, func() {
			s.mu.Lock()
			if s.waveGen == gen && s.c.ReleasedWaves == wave && s.c.Held > 0 {
				s.releaseLocked()
			}
			s.mu.Unlock()
		})
	}
	if s.c.Held >= s.barrierSize {
		s.releaseLocked()
		s.mu.Unlock()
		return nil
	}
	released := s.wave
	s.mu.Unlock()
	select {
	case <-released:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		if s.c.ReleasedWaves == wave && s.c.Held > 0 {
			s.c.Held--
			if s.c.Held == 0 {
				s.waveTimer.Stop()
				s.waveTimer = nil
				s.wave = nil
			}
		}
		s.mu.Unlock()
		return ctx.Err()
	}
}

// -- latency: at most slots generations at once; the others wait, FIFO

func (s *state) takeLocked() {
	s.c.Generating++
	if s.c.Generating > s.c.PeakGenerating {
		s.c.PeakGenerating = s.c.Generating
	}
}

func (s *state) acquire(ctx context.Context) error {
	s.mu.Lock()
	if s.c.Queued == 0 && s.c.Generating < s.slots {
		s.takeLocked()
		s.mu.Unlock()
		return nil
	}
	w := &waiter{ch: make(chan struct{})}
	s.queue = append(s.queue, w)
	s.c.Queued++
	s.mu.Unlock()
	select {
	case <-w.ch:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		granted := w.granted
		if !granted {
			w.gone = true
			s.c.Queued--
		}
		s.mu.Unlock()
		if granted {
			s.release()
		}
		return ctx.Err()
	}
}

func (s *state) release() {
	s.mu.Lock()
	s.c.Generating--
	for s.c.Generating < s.slots && len(s.queue) > 0 {
		w := s.queue[0]
		s.queue[0] = nil
		s.queue = s.queue[1:]
		if w.gone {
			continue
		}
		w.granted = true
		s.c.Queued--
		s.takeLocked()
		close(w.ch)
	}
	for len(s.queue) > 0 && s.queue[0].gone {
		s.queue[0] = nil
		s.queue = s.queue[1:]
	}
	s.mu.Unlock()
}
