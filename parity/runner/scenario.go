// Package runner replays parity scenarios against the real kube-apiserver and
// against kubeembed, normalises what legitimately differs (uids, resource
// version numbers, timestamps, generated names, allocated addresses) and
// reports every remaining difference.
package runner

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"sigs.k8s.io/yaml"
)

// File is one scenarios/*.yaml file: scenarios of one area (a group, or a
// behaviour such as server-side apply).
type File struct {
	// Area names the part of the API the scenarios cover; PARITY.md reports
	// a figure per area. Default: the file name without extension.
	Area      string     `json:"area"`
	Scenarios []Scenario `json:"scenarios"`
	// Kinds each expand into the standard CRUD scenarios (see Kind).
	Kinds []Kind `json:"kinds"`
	// Controllers runs the file's scenarios on servers with controllers:
	// kube-apiserver beside kube-controller-manager, kubeembed with its
	// own (the other files run on servers without).
	Controllers bool `json:"controllers"`
	// Cluster runs the file's scenarios on servers with pods that run:
	// kube-apiserver beside kube-controller-manager (with the node, pod
	// and endpoint controllers too), kube-scheduler and kubeembed's
	// simulated kubelet and provisioner as clients; kubeembed with all its
	// controllers. They run one at a time (a scheduler's answer counts
	// every node), each on the nodes it declares.
	Cluster bool `json:"cluster"`
}

// Scenario is a sequence of requests run from a clean state: a namespace of
// its own, named {ns} in the steps, created on both servers before the first
// step. Cluster-scoped objects should be named with {id}, which is unique to
// the scenario.
type Scenario struct {
	Name string `json:"name"`
	Area string `json:"-"`
	File string `json:"-"`
	// Controllers and Cluster are the file's.
	Controllers bool `json:"-"`
	Cluster     bool `json:"-"`
	// Nodes are simulated nodes added to both servers before the first
	// step and removed after the last (Cluster files only). Name them
	// with {id}: a removed node's pods stay bound to its name.
	Nodes []NodeSpec `json:"nodes,omitempty"`
	// Differs says why kubeembed differs from kube-apiserver here on
	// purpose, or why the reference cannot show what kubeembed does; the
	// scenario still counts as different, and PARITY.md prints the reason
	// next to its diff.
	Differs string `json:"differs,omitempty"`
	Steps   []Step `json:"steps"`
}

// Step is one request. Every string of Path, Query, Body, Raw, Headers, User
// and Groups may use the placeholders {ns}, {id}, {rv:STEP} and {uid:STEP};
// the last two take metadata.resourceVersion and metadata.uid from the
// response of the named earlier step, on each server its own.
type Step struct {
	// Name lets later steps refer to this one's response.
	Name string `json:"name,omitempty"`
	// Verb is an HTTP method, or WATCH: a GET with watch=true whose first
	// Events events are compared; or KUBELET: Action done by the simulated
	// kubelet (Cluster files) to the node or pod of Path, /nodes/NAME or
	// /namespaces/NS/pods/NAME (see KubeletActions).
	Verb  string            `json:"verb"`
	Path  string            `json:"path"`
	Query map[string]string `json:"query,omitempty"`
	// Body is sent as JSON (written as YAML in the file); Raw is sent as is.
	Body any    `json:"body,omitempty"`
	Raw  string `json:"raw,omitempty"`
	// ContentType defaults to application/json when there is a body, or to
	// application/merge-patch+json for a PATCH.
	ContentType string            `json:"contentType,omitempty"`
	Accept      string            `json:"accept,omitempty"`
	Headers     map[string]string `json:"headers,omitempty"`
	// User: empty for the admin (system:masters), "anonymous" for no
	// credentials, any other name to impersonate that user with Groups.
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// Events is how many watch events a WATCH step reads (default 1).
	Events int `json:"events,omitempty"`
	// Timeout bounds a WATCH step (default 5s), a watch that gets fewer
	// events compares what it got; and an Until step.
	Timeout string `json:"timeout,omitempty"`
	// Ignore lists dotted paths removed from both bodies before comparing,
	// for fields documented as differing (say why in a comment).
	Ignore []string `json:"ignore,omitempty"`
	// Until repeats the request (for up to Timeout, default 5s) until it
	// answers this status code, for what a server does asynchronously, such
	// as serving a new CRD. The last answer is compared.
	Until int `json:"until,omitempty"`
	// UntilContains repeats the request likewise until its body contains
	// this text (with Until, both must hold): for what controllers do.
	UntilContains string `json:"untilContains,omitempty"`
	// UntilAbsent likewise waits until the body no longer contains this.
	UntilAbsent string `json:"untilAbsent,omitempty"`
	// StatusOnly compares only the status code, reason and content type.
	StatusOnly bool `json:"statusOnly,omitempty"`
	// Action, Container and Code are a KUBELET step's.
	Action    string `json:"action,omitempty"`
	Container string `json:"container,omitempty"`
	Code      int32  `json:"code,omitempty"`
	// SortLines compares a text body as its lines in sorted order: health
	// checks are listed in the order each server registered them.
	SortLines bool `json:"sortLines,omitempty"`
	// MetricFamilies compares a /metrics answer (Prometheus text) as the
	// type and label names of each family named here that it has (see
	// metricFamilies): not values, which count each server's requests.
	MetricFamilies []string `json:"metricFamilies,omitempty"`
}

func (s Step) timeout() time.Duration {
	if d, err := time.ParseDuration(s.Timeout); err == nil && d > 0 {
		return d
	}
	return 5 * time.Second
}

// ID is the scenario's short identifier: a DNS label derived from its area,
// name and a salt (empty for a fresh server), used as its namespace and as
// {id}.
func (s Scenario) ID(salt string) string {
	sum := sha256.Sum256([]byte(salt + s.Area + "/" + s.Name))
	return "p-" + hex.EncodeToString(sum[:])[:10]
}

// FullName is "area/name".
func (s Scenario) FullName() string { return s.Area + "/" + s.Name }

var validVerb = map[string]bool{"GET": true, "POST": true, "PUT": true, "PATCH": true, "DELETE": true, "WATCH": true, "KUBELET": true}

// Load reads every *.yaml file of dir and returns the scenarios whose full
// name matches run (all when run is nil), sorted by file then order in file.
// Malformed files and duplicate names are errors, all reported at once.
func Load(dir string, run *regexp.Regexp) ([]Scenario, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	sort.Strings(paths)
	var (
		out  []Scenario
		errs []error
		seen = map[string]string{}
	)
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var f File
		if err := yaml.UnmarshalStrict(data, &f); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			continue
		}
		if f.Area == "" {
			f.Area = strings.TrimSuffix(filepath.Base(p), ".yaml")
		}
		for _, k := range f.Kinds {
			gen, err := k.Scenarios()
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", p, err))
			}
			f.Scenarios = append(f.Scenarios, gen...)
		}
		for i, s := range f.Scenarios {
			s.Area, s.File, s.Controllers, s.Cluster = f.Area, filepath.Base(p), f.Controllers, f.Cluster
			if err := s.validate(); err != nil {
				errs = append(errs, fmt.Errorf("%s: scenario %d (%q): %w", p, i, s.Name, err))
				continue
			}
			if prev, ok := seen[s.FullName()]; ok {
				errs = append(errs, fmt.Errorf("%s: scenario %q already defined in %s", p, s.FullName(), prev))
				continue
			}
			seen[s.FullName()] = p
			if run == nil || run.MatchString(s.FullName()) {
				out = append(out, s)
			}
		}
	}
	return out, errors.Join(errs...)
}

var refRE = regexp.MustCompile(`\{(rv|uid):([A-Za-z0-9_-]+)\}`)

func (s Scenario) validate() error {
	var errs []error
	if s.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if len(s.Steps) == 0 {
		errs = append(errs, errors.New("no steps"))
	}
	if len(s.Nodes) > 0 && !s.Cluster {
		errs = append(errs, errors.New("nodes are for the scenarios of a cluster file"))
	}
	names := map[string]bool{}
	for i, st := range s.Steps {
		if !validVerb[st.Verb] {
			errs = append(errs, fmt.Errorf("step %d: verb %q is not one of GET, POST, PUT, PATCH, DELETE, WATCH, KUBELET", i, st.Verb))
		}
		if err := st.validateKubelet(s.Cluster); err != nil {
			errs = append(errs, fmt.Errorf("step %d: %w", i, err))
		}
		if !strings.HasPrefix(st.Path, "/") {
			errs = append(errs, fmt.Errorf("step %d: path %q must start with /", i, st.Path))
		}
		if st.Body != nil && st.Raw != "" {
			errs = append(errs, fmt.Errorf("step %d: body and raw are exclusive", i))
		}
		for _, m := range refRE.FindAllStringSubmatch(st.Path+st.Raw+fmt.Sprint(st.Query)+fmt.Sprint(st.Body), -1) {
			if !names[m[2]] {
				errs = append(errs, fmt.Errorf("step %d: %s refers to no earlier step named %q", i, m[0], m[2]))
			}
		}
		if st.Name != "" {
			names[st.Name] = true
		}
	}
	return errors.Join(errs...)
}
