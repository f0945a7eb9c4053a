package faults

import (
	"bytes"
	"io"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/kubeembed/apiserver/internal/capture"
)

// Record is one request the server received and how it answered.
type Record struct {
	Request
	Time time.Time
	// Code is the HTTP status of the answer (a watch's: 200 once it
	// started); 0 if the connection was dropped.
	Code int
	// Faulted says an injected fault answered.
	Faulted bool
	// RequestBody and ResponseBody are kept when the recorder keeps bodies
	// (not of watches).
	RequestBody, ResponseBody []byte
}

// IsWrite says whether the record is of a request that changes objects.
func (r Record) IsWrite() bool {
	switch r.Verb {
	case "create", "update", "patch", "delete", "deletecollection":
		return true
	}
	return false
}

// Recorder keeps the requests a server received after authentication, in
// the order they arrived: the last MaxRecords of them (a server that runs
// for long, such as the CLI's, forgets the oldest). It is safe for
// concurrent use; the zero value records without bodies.
type Recorder struct {
	mu      sync.Mutex
	records []Record
	bodies  bool
}

// MaxRecords is how many records a Recorder keeps; when full, it forgets
// the oldest tenth.
const MaxRecords = 100_000

// KeepBodies makes the recorder keep request and response bodies from now
// on (they cost memory: off by default).
func (r *Recorder) KeepBodies(keep bool) {
	r.mu.Lock()
	r.bodies = keep
	r.mu.Unlock()
}

// Records returns the records that every filter keeps (all without one).
func (r *Recorder) Records(filters ...func(Record) bool) []Record {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Record
	for _, rec := range r.records {
		if !slices.ContainsFunc(filters, func(f func(Record) bool) bool { return !f(rec) }) {
			out = append(out, rec)
		}
	}
	return out
}

// Count is len(Records(filters...)).
func (r *Recorder) Count(filters ...func(Record) bool) int { return len(r.Records(filters...)) }

// Reset forgets every record.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.records = nil
	r.mu.Unlock()
}

// Filters for Records and Count.

// Writes keeps the requests that change objects.
func Writes(r Record) bool { return r.IsWrite() }

// Matching keeps the requests m matches.
func Matching(m Match) func(Record) bool { return func(r Record) bool { return m.matches(r.Request) } }

// Not keeps what filter drops: Count(Writes, Not(Matching(Match{FieldManager:
// "mine"}))) are the writes of other field managers.
func Not(filter func(Record) bool) func(Record) bool {
	return func(r Record) bool { return !filter(r) }
}

// Since keeps the requests received at or after t.
func Since(t time.Time) func(Record) bool { return func(r Record) bool { return !r.Time.Before(t) } }

func (r *Recorder) add(rec Record) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.records) >= MaxRecords {
		r.records = append(make([]Record, 0, MaxRecords), r.records[MaxRecords/10:]...)
	}
	r.records = append(r.records, rec)
}

func (r *Recorder) keepBodies() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.bodies
}

// Handler wraps the server's handler (inside authentication, where the
// request's user and kube-apiserver's request information are known): the
// injector's faults apply, the recorder records. The server's own requests
// pass untouched.
func Handler(next http.Handler, injector *Injector, recorder *Recorder) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		req := requestOf(r)
		if isServer(req) {
			next.ServeHTTP(w, r)
			return
		}
		rec := Record{Request: req, Time: time.Now()}
		bodies := recorder.keepBodies() && req.Verb != "watch"
		if bodies && r.Body != nil {
			rec.RequestBody, _ = io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(rec.RequestBody))
		}
		answer := &capture.Writer{ResponseWriter: w, KeepBody: bodies}
		defer func() {
			rec.Code, rec.ResponseBody = answer.Code, answer.Body.Bytes()
			recorder.add(rec)
		}()
		if action := injector.action(req); action != nil {
			rec.Faulted = true
			action(answer.Wrap(), r, next)
			return
		}
		next.ServeHTTP(answer.Wrap(), r)
	})
}
