package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers/kubelet"
)

// podExitUsage is --pod-exit's help.
const podExitUsage = "how the simulated kubelet's containers end, as kubelet.Rule does for tests in Go (repeatable; " +
	"the last given wins where several match): 'code=N[,after=DURATION][,owner=KIND][,namespace=NS][,container=NAME][,selector=LABELS]', " +
	"selector last (it may hold commas). Example: 'owner=Job,code=0,after=1s' makes Jobs' pods succeed a second after they start " +
	"(helm's hooks, kubectl wait --for=condition=complete). Without a rule containers run until their pod is deleted"

// podExits is --pod-exit: rules for the simulated kubelet's containers.
type podExits []kubelet.Rule

func (p *podExits) String() string { return fmt.Sprintf("%d rules", len(*p)) }

func (p *podExits) Set(v string) error {
	r, err := parsePodExit(v)
	if err != nil {
		return err
	}
	*p = append(*p, r)
	return nil
}

// parsePodExit reads one --pod-exit: comma-separated key=value fields,
// selector last. Each key at most once, no empty value.
func parsePodExit(v string) (kubelet.Rule, error) {
	r := kubelet.Rule{Exit: &kubelet.Exit{}}
	seen := map[string]bool{}
	for rest := strings.TrimSpace(v); rest != ""; rest = strings.TrimSpace(rest) {
		field := rest
		if key, _, _ := strings.Cut(rest, "="); strings.TrimSpace(key) != "selector" {
			field, rest, _ = strings.Cut(rest, ",")
		} else {
			rest = ""
		}
		key, value, ok := strings.Cut(field, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		switch {
		case !ok:
			return r, fmt.Errorf("%q: want key=value", field)
		case value == "":
			return r, fmt.Errorf("%s=: no value (an empty one would select every pod)", key)
		case seen[key]:
			return r, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		if err := setPodExitField(&r, key, value); err != nil {
			return r, err
		}
	}
	if !seen["code"] {
		return r, fmt.Errorf("%q: code=N is required (the containers' exit code)", v)
	}
	return r, nil
}

// podExitKeys are --pod-exit's keys.
var podExitKeys = []string{"code", "after", "owner", "namespace", "container", "selector"}

func setPodExitField(r *kubelet.Rule, key, value string) error {
	switch key {
	case "code":
		n, err := strconv.ParseInt(value, 10, 32)
		if err != nil || n < 0 || n > 255 {
			return fmt.Errorf("code=%s: want an exit code, 0 to 255", value)
		}
		r.Exit.Code = int32(n)
	case "after":
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return fmt.Errorf("after=%s: want a duration such as 500ms or 2s", value)
		}
		r.Exit.After = d
	case "owner":
		if first, _ := utf8.DecodeRuneInString(value); !unicode.IsUpper(first) {
			return fmt.Errorf("owner=%s: want a kind, such as Job (kinds are case-sensitive)", value)
		}
		r.OwnerKind = value
	case "namespace":
		r.Namespace = value
	case "container":
		r.Container = value
	case "selector":
		return setSelector(r, value)
	default:
		return fmt.Errorf("%s=%s: unknown key (known: %s)", key, value, strings.Join(podExitKeys, ", "))
	}
	return nil
}

// setSelector sets the rule's label selector, refusing one that took the
// fields meant to follow it (the selector must come last).
func setSelector(r *kubelet.Rule, value string) error {
	s, err := labels.Parse(value)
	if err != nil {
		return fmt.Errorf("selector=%s: %w", value, err)
	}
	reqs, _ := s.Requirements()
	for _, req := range reqs {
		if slices.Contains(podExitKeys, req.Key()) {
			return fmt.Errorf("selector=%s: holds %s=, a field of --pod-exit: the selector must come last", value, req.Key())
		}
	}
	r.Selector = s
	return nil
}

// addPodExits gives the rules and the images that fail to pull to srv's
// simulated kubelet, before it starts.
func addPodExits(srv *apiserver.Server, rules podExits, failPulls []string) error {
	if len(rules) == 0 && len(failPulls) == 0 {
		return nil
	}
	k := srv.Kubelet()
	if k == nil {
		flag := "--pod-exit"
		if len(rules) == 0 {
			flag = "--fail-image-pull"
		}
		return fmt.Errorf("%s: the simulated kubelet does not run (the 'envtest' profile, or --controllers without kubelet)", flag)
	}
	for _, r := range rules {
		k.AddRule(r)
	}
	for _, image := range failPulls {
		k.FailImagePulls(image, "")
	}
	return nil
}
