package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"unicode/utf8"
	"unsafe"
)

// The history's enums, as faultload/record/history.py numbers them.
const (
	outcomePending  = 0
	outcomeOK       = 1
	outcomeFailed   = 2
	outcomeLost     = 3
	outcomeRejected = 5
	outcomeCorrupt  = 6

	kindSubmit    = 0
	kindPoll      = 1
	kindAbandoned = 2

	tryAgainStatus = 1200
	maxCount       = 65535
	exampleChars   = 300
)

// errorClass is faultload/record/history.py ErrorClass; its key is the report's "errors" key.
type errorClass uint8

const (
	errNone errorClass = iota
	errConnect
	errReset
	errTimeout
	errHTTP404
	errHTTP4xx
	errHTTP5xx
	errServerFailed
	errIntegrity
	errDecode
	errOther
)

var errorKeys = [...]string{"none", "connect", "reset", "timeout", "http_404", "http_4xx", "http_5xx",
	"server_failed", "integrity", "decode", "other"}

// history is one worker's columns (faultload/record/history.py COLUMNS): a request's row is written only by
// the goroutine running it; attempts and examples are shared and locked.
type history struct {
	nonce, serverID                  []int64
	submitStart, submitEnd, done     []float64
	resultBytes                      []uint32
	attempts, submitRetries, repolls []uint16
	transportErrors                  []uint16
	worker, outcome, errorCol        []uint8
	mu                               sync.Mutex
	attRow                           []int32
	attKind                          []uint8
	attStart, attEnd                 []float32
	attStatus                        []int16
	examples                         map[string]string
}

func newHistory(n, worker int) *history {
	h := &history{
		nonce: make([]int64, n), serverID: make([]int64, n),
		submitStart: nanColumn(n), submitEnd: nanColumn(n), done: nanColumn(n),
		resultBytes: make([]uint32, n), attempts: make([]uint16, n), submitRetries: make([]uint16, n),
		repolls: make([]uint16, n), transportErrors: make([]uint16, n),
		worker: make([]uint8, n), outcome: make([]uint8, n), errorCol: make([]uint8, n),
		examples: map[string]string{},
	}
	for i := range h.worker {
		h.worker[i] = uint8(worker)
	}
	return h
}

func nanColumn(n int) []float64 {
	col := make([]float64, n)
	for i := range col {
		col[i] = math.NaN()
	}
	return col
}

func bump(col []uint16, row int) {
	if col[row] < maxCount {
		col[row]++
	}
}

func (h *history) attempt(row int, kind uint8, start, end float64, status int) {
	h.mu.Lock()
	h.attRow = append(h.attRow, int32(row))
	h.attKind = append(h.attKind, kind)
	h.attStart = append(h.attStart, float32(start))
	h.attEnd = append(h.attEnd, float32(end))
	h.attStatus = append(h.attStatus, int16(status))
	h.mu.Unlock()
}

// note records the request's last error class, and the first message of each class (cut to 300 characters,
// as Python slices a str).
func (h *history) note(row int, class errorClass, message string) {
	h.errorCol[row] = uint8(class)
	h.mu.Lock()
	if _, seen := h.examples[errorKeys[class]]; !seen {
		h.examples[errorKeys[class]] = cutChars(message, exampleChars)
	}
	h.mu.Unlock()
}

func cutChars(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	i := 0
	for pos := range s {
		if i == n {
			return s[:pos]
		}
		i++
	}
	return s
}

// save writes every column as its own .npy (numpy checks dtype and length on load), then the examples.
func (h *history) save(dir string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	columns := []struct {
		name, dtype string
		data        any
		n           int
	}{
		{"nonce", "<i8", h.nonce, len(h.nonce)}, {"server_id", "<i8", h.serverID, len(h.serverID)},
		{"submit_start", "<f8", h.submitStart, len(h.submitStart)},
		{"submit_end", "<f8", h.submitEnd, len(h.submitEnd)}, {"done", "<f8", h.done, len(h.done)},
		{"result_bytes", "<u4", h.resultBytes, len(h.resultBytes)},
		{"attempts", "<u2", h.attempts, len(h.attempts)}, {"submit_retries", "<u2", h.submitRetries, len(h.submitRetries)},
		{"repolls", "<u2", h.repolls, len(h.repolls)}, {"transport_errors", "<u2", h.transportErrors, len(h.transportErrors)},
		{"worker", "|u1", h.worker, len(h.worker)}, {"outcome", "|u1", h.outcome, len(h.outcome)},
		{"error", "|u1", h.errorCol, len(h.errorCol)},
		{"attempt_row", "<i4", h.attRow, len(h.attRow)}, {"attempt_kind", "|u1", h.attKind, len(h.attKind)},
		{"attempt_start", "<f4", h.attStart, len(h.attStart)}, {"attempt_end", "<f4", h.attEnd, len(h.attEnd)},
		{"attempt_status", "<i2", h.attStatus, len(h.attStatus)},
	}
	for _, c := range columns {
		if err := writeNpy(filepath.Join(dir, c.name+".npy"), c.dtype, c.n, c.data); err != nil {
			return err
		}
	}
	examples, _ := json.Marshal(h.examples)
	return os.WriteFile(filepath.Join(dir, "examples.json"), examples, 0o600)
}

// writeNpy writes a 1-d array in numpy's .npy format 1.0 (little-endian, as every column here).
func writeNpy(path, dtype string, n int, data any) error {
	header := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%d,), }", dtype, n)
	pad := 64 - (10+len(header)+1)%64
	header += string(bytes.Repeat([]byte{' '}, pad%64)) + "\n"
	var buf bytes.Buffer
	buf.WriteString("\x93NUMPY\x01\x00")
	_ = binary.Write(&buf, binary.LittleEndian, uint16(len(header)))
	buf.WriteString(header)
	if err := binary.Write(&buf, binary.LittleEndian, data); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o600)
}

// Live counter slots (faultload/client/counters.py), in the file the Python side copies into the trial's
// shared array.
const (
	ctrSubmitted = iota
	ctrAccepted
	ctrCompleted
	ctrFailed
	ctrInFlight
	ctrAttempts
	ctrConnectionsPeak
	ctrPollTimeouts
	counterSlots
)

type counters struct{ mem []byte }

func openCounters(path string) (*counters, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	mem, err := syscall.Mmap(int(f.Fd()), 0, 8*counterSlots, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mapping %s: %v", path, err)
	}
	return &counters{mem}, nil
}

func (c *counters) slot(i int) *int64 { return (*int64)(unsafe.Pointer(&c.mem[8*i])) }

func (c *counters) add(i int, delta int64) { atomic.AddInt64(c.slot(i), delta) }

func (c *counters) set(i int, v int64) { atomic.StoreInt64(c.slot(i), v) }
