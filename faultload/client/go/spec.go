package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
)

// rules are the tinker SDK's sampling retry rules as data (faultload/client/sdk_rules.py SDK_SAMPLING_RULES):
// the Python client reads the same record, so one source states them.
type rules struct {
	SubmitRetryStatuses []int `json:"submit_retry_statuses"` // retried with backoff inside the window
	RateLimited         int   `json:"rate_limited"`          // paused, the window begun again
	PollBackoffStatuses []int `json:"poll_backoff_statuses"` // re-polled after the backoff, its exponent kept
	PollAtOnceStatuses  []int `json:"poll_at_once_statuses"` // re-polled at once
	LostStatuses        []int `json:"lost_statuses"`         // the server no longer knows the request
	BadRequest          int   `json:"bad_request"`           // re-polled up to BadRequestRetries times
	BadRequestRetries   int   `json:"bad_request_retries"`
	BadRequestResetBy   []int `json:"bad_request_reset_by"` // answers that open the bad-request budget again
	RetryServerErrors   bool  `json:"retry_server_errors"`  // every 5xx: submit retried, poll again at once
}

// tlsSpec is how an https target is trusted (faultload/model/access.py).
type tlsSpec struct {
	CACert   string `json:"ca_cert"`
	Insecure bool   `json:"insecure"`
}

// spec is the one value the Python side sends on stdin (faultload/client/compiled_spec.py): every timer is
// already in trial seconds and every derived number already worked out, so no float or random rule is
// written twice.
type spec struct {
	Worker           int       `json:"worker"`
	Host             string    `json:"host"`
	Port             int       `json:"port"`
	Prefix           string    `json:"prefix"`
	TLS              *tlsSpec  `json:"tls"`
	SourceIP         string    `json:"source_ip"`
	Headers          string    `json:"headers"` // the pre-encoded "Name: value\r\n" block (the key among them)
	Accept           string    `json:"accept"`
	SessionID        string    `json:"session_id"`
	First            int64     `json:"first"`
	Count            int       `json:"count"`
	NonceSalt        int64     `json:"nonce_salt"`
	NumSamples       int       `json:"num_samples"`
	ResultTokens     int       `json:"result_tokens"`
	PromptExtra      int       `json:"prompt_extra"`
	Outstanding      int       `json:"outstanding"` // 0: no cap
	Submit           int       `json:"submit"`
	AsampleTimeoutS  float64   `json:"asample_timeout_s"`
	PollTimeoutS     float64   `json:"poll_timeout_s"`
	SubmitWindowS    float64   `json:"submit_window_s"`
	RateLimitPauseS  float64   `json:"rate_limit_pause_s"`
	KeepaliveExpiryS float64   `json:"keepalive_expiry_s"` // <= 0: connections never expire
	ConnectTimeoutS  float64   `json:"connect_timeout_s"`
	BackoffS         []float64 `json:"backoff_s"` // backoff after n failures; the last entry repeats
	AbandonAfterS    float64   `json:"abandon_after_s"`
	AbandonWaitS     float64   `json:"abandon_wait_s"`
	Seed             uint64    `json:"seed"`
	DelayFraction    float64   `json:"delay_fraction"`
	DelayS           float64   `json:"delay_s"`
	AbandonFraction  float64   `json:"abandon_fraction"`
	ArrivalsPath     string    `json:"arrivals_path"` // float64 little-endian offsets, one per row; "": a burst
	DeadlineS        float64   `json:"deadline_s"`
	Rules            rules     `json:"rules"`
	OutDir           string    `json:"out_dir"`
	CountersPath     string    `json:"counters_path"`
	StopCheckS       float64   `json:"stop_check_s"`
}

const nonceIndexBits = 24 // faultload/model/tokens.py NONCE_INDEX_BITS

func (s *spec) nonce(row int) int64 { return s.NonceSalt<<nonceIndexBits | (s.First + int64(row)) }

func (s *spec) backoff(failures int) float64 {
	return s.BackoffS[min(failures, len(s.BackoffS)-1)]
}

func parseSpec(line []byte) (*spec, error) {
	s := &spec{}
	if err := json.Unmarshal(line, s); err != nil {
		return nil, fmt.Errorf("the spec is not JSON of the expected fields: %v", err)
	}
	return s, s.validate()
}

func (s *spec) validate() error {
	positive := map[string]float64{
		"asample_timeout_s": s.AsampleTimeoutS, "poll_timeout_s": s.PollTimeoutS,
		"connect_timeout_s": s.ConnectTimeoutS, "abandon_after_s": s.AbandonAfterS, "stop_check_s": s.StopCheckS,
	}
	for name, v := range positive {
		if !(v > 0) || math.IsInf(v, 0) {
			return fmt.Errorf("%s: must be a positive number of seconds (got %g)", name, v)
		}
	}
	switch {
	case s.Host == "" || s.Port <= 0 || s.Port > 65535:
		return fmt.Errorf("host/port: %q:%d is not an address", s.Host, s.Port)
	case s.Count < 0 || s.Submit < 1 || s.Outstanding < 0:
		return fmt.Errorf("count %d, submit %d, outstanding %d: out of range", s.Count, s.Submit, s.Outstanding)
	case len(s.BackoffS) == 0:
		return fmt.Errorf("backoff_s: empty")
	case s.OutDir == "" || s.CountersPath == "":
		return fmt.Errorf("out_dir and counters_path are needed")
	case s.First+int64(s.Count) > 1<<nonceIndexBits:
		return fmt.Errorf("rows past %d: the nonce's index bits", 1<<nonceIndexBits)
	}
	return nil
}

// arrivals reads the rows' earliest starts (trial seconds); nil for a burst.
func (s *spec) arrivals() ([]float64, error) {
	if s.ArrivalsPath == "" {
		return nil, nil
	}
	raw, err := os.ReadFile(s.ArrivalsPath)
	if err != nil {
		return nil, err
	}
	if len(raw) != 8*s.Count {
		return nil, fmt.Errorf("arrivals: %d bytes for %d rows", len(raw), s.Count)
	}
	out := make([]float64, s.Count)
	for i := range out {
		out[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[8*i:]))
	}
	return out, nil
}

func contains(set []int, v int) bool {
	for _, x := range set {
		if x == v {
			return true
		}
	}
	return false
}
