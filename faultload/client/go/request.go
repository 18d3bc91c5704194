package main

import (
	"fmt"
	"math"
	"time"

	"faultload/client/wire"
)

// One request's life, rule for rule as faultload/client/raw.py's RawClient (_one, _asample, _retrieve,
// _settle, _judge): the tinker SDK's sampling retry rules, stated in the spec's rules.

const (
	pending  = -1 // the deadline or the stop came first: the request stays unfinished
	rejected = -2
)

// errStopped unwinds a request whose wait the stop (or the deadline) cut: nothing more is recorded for it.
type errStopped struct{}

func (c *client) one(row int) {
	h, nonce := c.h, c.s.nonce(row)
	h.nonce[row] = nonce
	c.ctr.add(ctrInFlight, 1)
	defer c.ctr.add(ctrInFlight, -1)
	h.submitStart[row] = c.now()
	c.ctr.add(ctrSubmitted, 1)
	id, state := c.submitted(row, nonce)
	switch state {
	case rejected:
		h.submitEnd[row], h.outcome[row] = c.now(), outcomeRejected
		c.ctr.add(ctrFailed, 1)
		return
	case pending:
		return
	}
	h.submitEnd[row] = c.now()
	h.serverID[row] = wire.ServerIDKey(id)
	c.ctr.add(ctrAccepted, 1)
	outcome := c.retrieve(row, nonce, id)
	if outcome == pending {
		return
	}
	h.outcome[row], h.done[row] = uint8(outcome), c.now()
	if outcome == outcomeOK {
		c.ctr.add(ctrCompleted, 1)
	} else {
		c.ctr.add(ctrFailed, 1)
	}
}

// submitted holds a submit slot for the whole asample, backoff and pauses included, as raw.py does.
func (c *client) submitted(row int, nonce int64) (string, int) {
	c.acquire(c.submit)
	defer func() { <-c.submit }()
	return c.asample(row, nonce)
}

// asample is the server's request id, or rejected (the SDK raised), or pending.
func (c *client) asample(row int, nonce int64) (string, int) {
	h, s, r := c.h, c.s, &c.s.Rules
	body := wire.AsampleBody(s.SessionID, s.First+int64(row), s.NumSamples, s.ResultTokens, s.PromptExtra, nonce)
	windowStart, failures := c.now(), 0
	for c.now() < s.DeadlineS {
		bump(h.attempts, row)
		c.ctr.add(ctrAttempts, 1)
		started := c.now()
		a := c.pool.post(c.sampleHead, c.jsonHeaders, body, s.AsampleTimeoutS, c.stop)
		if a.err != nil {
			c.stopped(a)
			bump(h.transportErrors, row)
			h.note(row, a.err.class(), "asample: "+a.err.kind+": "+a.err.msg)
			h.attempt(row, kindSubmit, started, c.now(), -int(a.err.class()))
		} else {
			h.attempt(row, kindSubmit, started, c.now(), a.status)
			if a.status >= 200 && a.status < 300 { // as the SDK: any 2xx (SkyRL answers 200, TuFT 202)
				id, err := wire.RequestIDOf(a.body)
				if err != nil {
					h.note(row, errDecode, "asample: bad body: "+err.Error())
					return "", rejected
				}
				return id, 0
			}
			class := errHTTP4xx
			if a.status >= 500 {
				class = errHTTP5xx
			}
			h.note(row, class, fmt.Sprintf("asample: HTTP %d: %s", a.status, pyBytesRepr(a.body, 200)))
			serverError := a.status >= 500 && r.RetryServerErrors
			if a.status != r.RateLimited && !contains(r.SubmitRetryStatuses, a.status) && !serverError {
				return "", rejected
			}
			if a.status == r.RateLimited {
				bump(h.submitRetries, row)
				c.sleep(s.RateLimitPauseS)
				windowStart, failures = c.now(), 0
				continue
			}
		}
		// As execute_with_retries: retry while inside the window, never sleeping past its end.
		left := windowStart + s.SubmitWindowS - c.now()
		if left <= 0 {
			return "", rejected
		}
		bump(h.submitRetries, row)
		c.sleep(math.Min(s.backoff(failures), left))
		failures++
	}
	return "", pending
}

// retrieve polls until the result, a definite failure, or the deadline (as the SDK: no count limit).
func (c *client) retrieve(row int, nonce int64, id string) int {
	h, s, r := c.h, c.s, &c.s.Rules
	delay, abandon := wire.FirstPollPlan(s.Seed, nonce, s.DelayFraction, s.DelayS, s.AbandonFraction)
	if delay > 0 {
		c.sleep(delay)
	}
	body := wire.PollBody(id)
	transportFailures, badRequests, poll := 0, 0, 0
	for c.now() < s.DeadlineS {
		poll++
		if poll > 1 {
			bump(h.repolls, row)
		}
		bump(h.attempts, row)
		c.ctr.add(ctrAttempts, 1)
		started := c.now()
		a, dropped := c.sendPoll(row, body, abandon && poll == 1, started)
		if dropped {
			continue // abandoned client-side: poll again
		}
		if a.err != nil {
			c.pollFailed(row, started, a.err)
			c.sleep(s.backoff(transportFailures))
			transportFailures++
			continue
		}
		tryAgain := a.status == 200 && wire.IsTryAgain(a.ctype, a.body)
		status := a.status
		if tryAgain {
			status = tryAgainStatus
		}
		h.attempt(row, kindPoll, started, c.now(), status)
		if contains(r.PollBackoffStatuses, a.status) {
			// As the SDK: rate limited -> re-poll after the connection-error backoff, its exponent not reset.
			h.note(row, errHTTP4xx, fmt.Sprintf("retrieve_future: HTTP %d: %s", a.status, pyBytesRepr(a.body, 200)))
			c.sleep(s.backoff(transportFailures))
			transportFailures++
			continue
		}
		transportFailures = 0
		if tryAgain {
			continue // the server's "not yet", polled again at once
		}
		if a.status == 200 {
			if failure, reported := wire.FailureReported(a.ctype, a.body); reported {
				h.note(row, errServerFailed, "retrieve_future: 200 request failed: "+cutChars(failure, 300))
				return outcomeFailed
			}
			return c.judge(row, nonce, a)
		}
		var outcome int
		if outcome, badRequests = c.settle(row, id, a, badRequests); outcome != pending {
			return outcome
		}
	}
	return pending
}

// pollFailed records a poll's transport error (a poll timeout also counted live: anchored faults wait for it).
func (c *client) pollFailed(row int, started float64, err *httpError) {
	bump(c.h.transportErrors, row)
	if err.class() == errTimeout {
		c.ctr.add(ctrPollTimeouts, 1)
	}
	c.h.note(row, err.class(), "retrieve_future: "+err.kind+": "+err.msg)
	c.h.attempt(row, kindPoll, started, c.now(), -int(err.class()))
}

// settle is what a poll answered with neither 200 nor a backoff status ends as (pending: poll again).
func (c *client) settle(row int, id string, a answer, badRequests int) (int, int) {
	h, r := c.h, &c.s.Rules
	switch {
	case contains(r.LostStatuses, a.status):
		h.note(row, errHTTP404, fmt.Sprintf("retrieve_future %s: HTTP %d: %s", id, a.status, pyBytesRepr(a.body, 200)))
		return outcomeLost, badRequests
	case contains(r.PollAtOnceStatuses, a.status) || (a.status >= 500 && r.RetryServerErrors):
		if a.status >= 500 {
			h.note(row, errHTTP5xx, fmt.Sprintf("retrieve_future: HTTP %d: %s", a.status, pyBytesRepr(a.body, 200)))
		}
		if contains(r.BadRequestResetBy, a.status) {
			return pending, 0 // a round trip, re-opening the bare-400 budget
		}
		return pending, badRequests
	case a.status == r.BadRequest:
		h.note(row, errServerFailed, fmt.Sprintf("retrieve_future: HTTP %d: %s", a.status, pyBytesRepr(a.body, 300)))
		if badRequests < r.BadRequestRetries {
			return pending, badRequests + 1
		}
		return outcomeFailed, badRequests
	}
	h.note(row, errHTTP4xx, fmt.Sprintf("retrieve_future: HTTP %d: %s", a.status, pyBytesRepr(a.body, 200)))
	return outcomeFailed, badRequests
}

// sendPoll is one poll's answer; dropped when it was abandoned client-side (recorded, and waited out).
func (c *client) sendPoll(row int, body []byte, abandon bool, started float64) (answer, bool) {
	if !abandon {
		a := c.pool.post(c.pollHead, c.pollHeaders, body, c.s.PollTimeoutS, c.stop)
		c.stopped(a)
		return a, false
	}
	drop := make(chan struct{})
	timer := time.AfterFunc(time.Duration(c.s.AbandonAfterS*float64(time.Second)), func() { close(drop) })
	a := c.pool.post(c.pollHead, c.pollHeaders, body, c.s.PollTimeoutS, merged(c.stop, drop))
	_ = timer // left to fire: the goroutine merging the two channels ends with it
	c.stopped(a)
	if a.err == nil || a.err.kind != "cancelled" {
		return a, false
	}
	c.h.attempt(row, kindAbandoned, started, c.now(), 0)
	c.sleep(c.s.AbandonWaitS)
	return a, true
}

func (c *client) judge(row int, nonce int64, a answer) int {
	c.h.resultBytes[row] = uint32(min(len(a.body), math.MaxUint32))
	checker := c.checkers.Get().(*wire.Checker)
	class, message := checker.Judge(a.ctype, a.body, nonce)
	c.checkers.Put(checker)
	switch class {
	case 0:
		return outcomeOK
	case int(errDecode):
		c.h.note(row, errDecode, fmt.Sprintf("result of nonce %d: %s", nonce, message))
	default:
		c.h.note(row, errIntegrity, fmt.Sprintf("result of nonce %d: %s", nonce, message))
	}
	return outcomeCorrupt
}
