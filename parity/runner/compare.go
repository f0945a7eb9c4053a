package runner

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/google/go-cmp/cmp"
)

// StepResult is the comparison of one step.
type StepResult struct {
	Step Step
	// Diff is empty when the normalised responses are identical; otherwise
	// a cmp.Diff with the real server as "-" and kubeembed as "+".
	Diff string
}

// Result is the comparison of one scenario.
type Result struct {
	Scenario Scenario
	Steps    []StepResult
	// SetupErr is set when the scenario could not be prepared (its namespace
	// was refused); such a scenario counts as different.
	SetupErr string
	// GaveUp lists the Until steps that timed out ("step 4 on
	// kube-apiserver after 30s"): the scenario waited for something that
	// did not come, which is slow even where both servers agree.
	GaveUp []string
}

// Identical reports whether every step matched.
func (r Result) Identical() bool {
	if r.SetupErr != "" {
		return false
	}
	for _, s := range r.Steps {
		if s.Diff != "" {
			return false
		}
	}
	return true
}

// Runner runs scenarios against a reference server (the real
// kube-apiserver) and a candidate (kubeembed).
type Runner struct {
	Reference, Candidate *Target
	// ServiceCIDR is the service IP range both servers were given.
	ServiceCIDR *net.IPNet
	// Parallel scenarios at once (default 4): they never share objects.
	Parallel int
	// Salt makes scenario IDs (namespaces, names) unique to this run, for a
	// reference server reused across runs.
	Salt string
	// Dump, when set, is a directory the normalised responses of each
	// scenario are written to (AREA_NAME.json: reference and candidate),
	// to read a difference in full.
	Dump string
	// Done, when set, is called as each scenario ends, with the time it
	// took (both servers), from the goroutine that ran it.
	Done func(Result, time.Duration)
}

// Run runs every scenario and returns the results in the same order.
func (r *Runner) Run(ctx context.Context, scenarios []Scenario) []Result {
	results := make([]Result, len(scenarios))
	sem := make(chan struct{}, max(r.Parallel, 1))
	if r.Parallel == 0 {
		sem = make(chan struct{}, 4)
	}
	var wg sync.WaitGroup
	for i, s := range scenarios {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			start := time.Now()
			results[i] = r.RunOne(ctx, s)
			if r.Done != nil {
				r.Done(results[i], time.Since(start))
			}
		}()
	}
	wg.Wait()
	return results
}

// RunOne runs one scenario on both servers and compares them step by step.
func (r *Runner) RunOne(ctx context.Context, s Scenario) Result {
	res := Result{Scenario: s}
	var ref, cand []Response
	for _, t := range []*Target{r.Reference, r.Candidate} {
		if err := setup(ctx, t, s.ID(r.Salt)); err != "" {
			res.SetupErr = t.Name + ": " + err
			return res
		}
		if err := t.addNodes(ctx, s, s.ID(r.Salt)); err != nil {
			t.cleanUp(ctx, s, s.ID(r.Salt))
			res.SetupErr = t.Name + ": " + err.Error()
			return res
		}
		resps, gaveUp := run(ctx, t, s, s.ID(r.Salt))
		res.GaveUp = append(res.GaveUp, gaveUp...)
		t.cleanUp(ctx, s, s.ID(r.Salt))
		if t == r.Reference {
			ref = resps
		} else {
			cand = resps
		}
	}
	ref = Normalise(&Normaliser{ServiceCIDR: r.ServiceCIDR, Concurrent: s.Cluster}, ref)
	cand = Normalise(&Normaliser{ServiceCIDR: r.ServiceCIDR, Concurrent: s.Cluster}, cand)
	if r.Dump != "" {
		dump(r.Dump, s, ref, cand)
	}
	for i, st := range s.Steps {
		res.Steps = append(res.Steps, StepResult{Step: st, Diff: diffStep(st, ref[i], cand[i])})
	}
	return res
}

// setup creates the scenario's namespace and its default service account,
// as the service account controller of a real cluster would.
func setup(ctx context.Context, t *Target, ns string) string {
	steps := []Step{
		{Verb: "POST", Path: "/api/v1/namespaces", Body: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}},
		{Verb: "POST", Path: "/api/v1/namespaces/" + ns + "/serviceaccounts", Body: map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default"}}},
	}
	for _, st := range steps {
		r := t.Do(ctx, st, ns, ns, nil)
		if r.Code != 201 && r.Code != 409 {
			return st.Path + ": " + compactJSON(r.Body) + r.Err
		}
	}
	return ""
}

// run runs the steps of s on t; it also returns the Until steps that
// timed out.
func run(ctx context.Context, t *Target, s Scenario, id string) (_ []Response, gaveUp []string) {
	earlier := map[string]Response{}
	out := make([]Response, 0, len(s.Steps))
	for i, st := range s.Steps {
		resp := t.Do(ctx, st, id, id, earlier)
		if st.Until != 0 || st.UntilContains != "" || st.UntilAbsent != "" {
			deadline := time.Now().Add(st.timeout())
			for !settled(st, resp) && time.Now().Before(deadline) && ctx.Err() == nil {
				time.Sleep(50 * time.Millisecond) // polling a server's asynchronous work
				resp = t.Do(ctx, st, id, id, earlier)
			}
			if !settled(st, resp) {
				gaveUp = append(gaveUp, fmt.Sprintf("step %d on %s after %s", i+1, t.Name, st.timeout()))
			}
		}
		if st.Name != "" {
			earlier[st.Name] = resp
		}
		out = append(out, resp)
	}
	return out, gaveUp
}

// settled: the answer has the status code and the text an Until step waits
// for, in the body as the server wrote it (its field order) or with its
// keys sorted; and not the text it waits to see gone, in either.
func settled(st Step, r Response) bool {
	sorted := compactJSON(r.Body)
	has := func(text string) bool {
		return strings.Contains(sorted, text) || (r.Raw != "" && strings.Contains(r.Raw, text))
	}
	return (st.Until == 0 || r.Code == st.Until) && (st.UntilContains == "" || has(st.UntilContains)) &&
		(st.UntilAbsent == "" || !has(st.UntilAbsent))
}

// comparable is what a step compares.
type comparable struct {
	Code    int
	Headers map[string][]string
	Body    any
	Events  []any
	Err     string
}

func view(st Step, r Response) comparable {
	c := comparable{Code: r.Code, Headers: r.Headers, Body: r.Body, Events: r.Events, Err: r.Err}
	for _, p := range st.Ignore {
		path := strings.Split(p, ".")
		dropPath(c.Body, path)
		for _, e := range c.Events {
			if em, ok := e.(map[string]any); ok {
				dropPath(em["object"], path)
			}
		}
	}
	if text, ok := c.Body.(string); ok && st.SortLines {
		lines := strings.Split(strings.TrimRight(text, "\n"), "\n")
		slices.Sort(lines)
		c.Body = strings.Join(lines, "\n")
	}
	if st.StatusOnly {
		reason := ""
		if m, ok := r.Body.(map[string]any); ok && m["kind"] == "Status" {
			reason, _ = m["reason"].(string)
		}
		c = comparable{Code: r.Code, Body: reason, Headers: map[string][]string{"Content-Type": r.Headers["Content-Type"]}}
	}
	return c
}

func diffStep(st Step, ref, cand Response) string {
	return cmp.Diff(view(st, ref), view(st, cand))
}

// dump writes a scenario's normalised responses to dir; a failure to write
// is reported on the scenario's first step.
func dump(dir string, s Scenario, ref, cand []Response) {
	data, err := json.MarshalIndent(map[string][]Response{"reference": ref, "candidate": cand}, "", "  ")
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, strings.ReplaceAll(s.FullName(), "/", "_")+".json"), data, 0o644)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "dump %s: %v\n", s.FullName(), err)
	}
}
