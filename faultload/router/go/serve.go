package main

// The routes (faultload/router/app.py's RouterApp for one process): completions through the mode's
// gate and the fault windows, /health, /stats, /control/<fault>.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fastjson"
)

const (
	maxFaultS    = 86_400.0
	stallPoll    = 20 * time.Millisecond
	maxBodyBytes = 64 << 20
)

type app struct {
	cfg         config
	s           *state
	pid         string
	completions *os.File // nil: not recorded
	stallMu     sync.Mutex
	stalled     chan struct{} // closed when the current stall ends; nil when none is watched
}

type response struct {
	status      int
	body        []byte
	contentType string
	pidHeader   bool
}

func errorJSON(status int, message string) []byte {
	kind := "ServiceUnavailableError"
	if status < 500 {
		kind = "BadRequestError"
	}
	msg, _ := json.Marshal(message)
	return fmt.Appendf(nil, `{"object": "error", "message": %s, "type": "%s", "param": null, "code": %d}`,
		msg, kind, status)
}

func jsonResponse(v any, status int) response {
	body, _ := json.Marshal(v)
	return response{status: status, body: body, contentType: "application/json"}
}

func text(status int, body string) response {
	return response{status: status, body: []byte(body), contentType: "text/plain; charset=utf-8"}
}

// write sends r whole; true when every byte reached the socket.
func (a *app) write(w http.ResponseWriter, r response) bool {
	h := w.Header()
	h["Content-Type"] = []string{r.contentType}
	h["Content-Length"] = []string{strconv.Itoa(len(r.body))}
	if r.pidHeader {
		h["X-Router-Pid"] = []string{a.pid}
	}
	w.WriteHeader(r.status)
	if _, err := w.Write(r.body); err != nil {
		return false
	}
	return http.NewResponseController(w).Flush() == nil
}

func (a *app) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	path, method := req.URL.Path, req.Method
	const control = "/control/"
	switch {
	case path == "/v1/completions":
		if method == http.MethodPost {
			a.completionsRoute(w, req)
			return
		}
	case path == "/health":
		if method == http.MethodGet {
			a.write(w, text(200, "ok"))
			return
		}
	case path == "/stats":
		if method == http.MethodGet {
			a.write(w, jsonResponse(a.s.snapshot(a.cfg.procs, a.cfg.mode), 200))
			return
		}
	case strings.HasPrefix(path, control) && len(path) > len(control) && !strings.Contains(path[len(control):], "/"):
		if method == http.MethodPost {
			a.write(w, a.control(path[len(control):], req))
			return
		}
	default:
		a.write(w, text(404, "404: Not Found"))
		return
	}
	a.write(w, text(405, "405: Method Not Allowed"))
}

// -- control

type controlError struct {
	status int
	msg    string
}

func (a *app) control(fault string, req *http.Request) response {
	raw, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, maxBodyBytes))
	if err != nil {
		return text(413, "413: Request Entity Too Large")
	}
	var body *fastjson.Value // nil: an empty body, i.e. {}
	if len(bytes.TrimSpace(raw)) > 0 {
		p := parsers.Get()
		defer parsers.Put(p)
		if body, err = p.ParseBytes(raw); err != nil {
			return jsonResponse(map[string]string{"error": err.Error()}, 400)
		}
		if body.Type() != fastjson.TypeObject {
			return jsonResponse(map[string]string{"error": "body must be a JSON object"}, 400)
		}
	}
	if e := a.applyFault(fault, body); e != nil {
		return jsonResponse(map[string]string{"error": e.msg}, e.status)
	}
	return jsonResponse(a.s.snapshot(a.cfg.procs, a.cfg.mode).Faults, 200)
}

// field is the body's value for key, nil when absent (or when there is no body).
func field(body *fastjson.Value, key string) *fastjson.Value {
	if body == nil {
		return nil
	}
	return body.Get(key)
}

// number is a JSON number (not a bool), as a float.
func number(v *fastjson.Value) (float64, bool) {
	if v == nil || v.Type() != fastjson.TypeNumber {
		return 0, false
	}
	f, err := v.Float64()
	return f, err == nil
}

func (a *app) applyFault(fault string, body *fastjson.Value) *controlError {
	if fault == "reset" {
		for _, name := range timedFaults {
			a.s.setWindow(name, 0, nil)
		}
		return nil
	}
	if !isTimedFault(fault) {
		return &controlError{404, fmt.Sprintf("unknown fault '%s'", fault)}
	}
	v := field(body, "seconds")
	seconds, ok := number(v)
	if !ok || seconds < 0 || seconds > maxFaultS {
		return &controlError{400, fmt.Sprintf("seconds must be a number in [0, %g] (got %s)", maxFaultS, v)}
	}
	if fault == "errors" {
		status := int64(503)
		if v := field(body, "status"); v != nil {
			st, ok := intOf(v)
			if !ok || st < 400 || st > 599 {
				return &controlError{400, fmt.Sprintf("status must be an int in [400, 599] (got %s)", v)}
			}
			status = st
		}
		a.s.mu.Lock()
		a.s.errorsStatus = status
		a.s.mu.Unlock()
	}
	var until *float64
	if v := field(body, "until_monotonic"); v != nil && v.Type() != fastjson.TypeNull {
		u, ok := number(v)
		if !ok {
			return &controlError{400, fmt.Sprintf("until_monotonic must be a number (got %s)", v)}
		}
		until = &u
	}
	a.s.setWindow(fault, seconds, until)
	return nil
}

// -- completions

func (a *app) injectedError() *response {
	if a.s.windowLeft("errors") <= 0 {
		return nil
	}
	a.s.mu.Lock()
	status := a.s.errorsStatus
	a.s.c.ErrorsInjected++
	a.s.mu.Unlock()
	if status == 0 {
		status = 503
	}
	return &response{status: int(status), body: errorJSON(int(status), "injected fault"),
		contentType: "application/json", pidHeader: true}
}

// completionsRoute answers one sample request; in_flight covers everything up to the last byte written.
func (a *app) completionsRoute(w http.ResponseWriter, req *http.Request) {
	a.s.arrive()
	completed, sent := false, int64(0)
	defer func() { a.s.depart(completed, sent) }()
	resp, nonce, err := a.answer(req)
	if err != nil { // the client left while its request waited
		a.s.add(&a.s.c.Cancelled, 1)
		return
	}
	if a.write(w, resp) && resp.status == 200 {
		completed, sent = true, int64(len(resp.body))
		a.record(nonce)
	}
}

func (a *app) answer(req *http.Request) (response, int64, error) {
	if early := a.injectedError(); early != nil {
		return *early, -1, nil
	}
	raw, err := io.ReadAll(http.MaxBytesReader(nil, req.Body, maxBodyBytes))
	if err != nil {
		return text(413, "413: Request Entity Too Large"), -1, nil
	}
	j, why := parseJob(raw)
	if j == nil {
		a.s.add(&a.s.c.BadRequests, 1)
		return response{status: 400, body: errorJSON(400, why), contentType: "application/json", pidHeader: true}, -1, nil
	}
	ctx := req.Context()
	if err := a.modeGate(ctx); err != nil {
		return response{}, -1, err
	}
	if err := a.stallGate(ctx); err != nil {
		return response{}, -1, err
	}
	if late := a.injectedError(); late != nil {
		return *late, -1, nil
	}
	body := completionBody(j)
	if a.s.windowLeft("truncate") > 0 {
		body = body[:len(body)/2]
		a.s.add(&a.s.c.Truncated, 1)
	}
	return response{status: 200, body: body, contentType: "application/json", pidHeader: true}, j.nonce, nil
}

func (a *app) modeGate(ctx context.Context) error {
	switch a.cfg.mode {
	case "barrier":
		return a.s.barrierWait(ctx)
	case "latency":
		if err := a.s.acquire(ctx); err != nil {
			return err
		}
		defer a.s.release()
		t := time.NewTimer(time.Duration(a.cfg.genSeconds * float64(time.Second)))
		defer t.Stop()
		select {
		case <-t.C:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// stallGate waits out a stall window. Every stalled request waits on one channel, closed by one watcher that
// re-reads the window every stallPoll (a reset or an extension takes effect): thousands of held requests cost
// one timer, not one each (as the Python router's one event does).
func (a *app) stallGate(ctx context.Context) error {
	if a.s.windowLeft("stall") <= 0 {
		return nil
	}
	a.s.add(&a.s.c.Stalled, 1)
	defer a.s.add(&a.s.c.Stalled, -1)
	select {
	case <-a.stallOver():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stallOver is the current stall's channel, its watcher started by the first request it holds.
func (a *app) stallOver() chan struct{} {
	a.stallMu.Lock()
	defer a.stallMu.Unlock()
	if a.stalled == nil {
		over := make(chan struct{})
		a.stalled = over
		go a.watchStall(over)
	}
	return a.stalled
}

func (a *app) watchStall(over chan struct{}) {
	deadline := time.Now().Add(time.Duration(maxFaultS * float64(time.Second)))
	for time.Now().Before(deadline) {
		left := a.s.windowLeft("stall")
		if left <= 0 {
			break
		}
		wait := stallPoll
		if d := time.Duration(left * float64(time.Second)); d < wait {
			wait = d
		}
		time.Sleep(wait)
	}
	a.stallMu.Lock()
	a.stalled = nil
	a.stallMu.Unlock()
	close(over)
}

// record appends (nonce, wall-clock time) as 16 little-endian bytes, unbuffered: a crashed router loses nothing.
func (a *app) record(nonce int64) {
	if a.completions == nil || nonce < 0 {
		return
	}
	var rec [16]byte
	putUint64(rec[:8], uint64(nonce))
	now := time.Now()
	putUint64(rec[8:], math.Float64bits(float64(now.UnixNano())/1e9))
	a.completions.Write(rec[:])
}

func putUint64(b []byte, v uint64) {
	for i := 0; i < 8; i++ {
		b[i] = byte(v >> (8 * i))
	}
}
