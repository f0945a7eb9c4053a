package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

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
// selector last.
func parsePodExit(v string) (kubelet.Rule, error) {
	r := kubelet.Rule{}
	code := false
	for rest := strings.TrimSpace(v); rest != ""; {
		var field string
		if strings.HasPrefix(rest, "selector=") {
			field, rest = rest, ""
		} else {
			field, rest, _ = strings.Cut(rest, ",")
			rest = strings.TrimSpace(rest)
		}
		key, value, ok := strings.Cut(strings.TrimSpace(field), "=")
		if !ok {
			return r, fmt.Errorf("%q: want key=value", field)
		}
		if err := setPodExitField(&r, key, strings.TrimSpace(value)); err != nil {
			return r, err
		}
		code = code || key == "code"
	}
	if !code {
		return r, fmt.Errorf("%q: code=N is required (the containers' exit code)", v)
	}
	return r, nil
}

func setPodExitField(r *kubelet.Rule, key, value string) error {
	if r.Exit == nil {
		r.Exit = &kubelet.Exit{}
	}
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
		r.OwnerKind = value
	case "namespace":
		r.Namespace = value
	case "container":
		r.Container = value
	case "selector":
		s, err := labels.Parse(value)
		if err != nil {
			return fmt.Errorf("selector=%s: %w", value, err)
		}
		r.Selector = s
	default:
		return fmt.Errorf("%s=%s: unknown key (known: code, after, owner, namespace, container, selector)", key, value)
	}
	return nil
}

// addPodExits gives the rules to srv's simulated kubelet, before it starts.
func addPodExits(srv *apiserver.Server, rules podExits) error {
	if len(rules) == 0 {
		return nil
	}
	k := srv.Kubelet()
	if k == nil {
		return fmt.Errorf("--pod-exit: the simulated kubelet does not run (the 'envtest' profile, or --controllers without kubelet)")
	}
	for _, r := range rules {
		k.AddRule(r)
	}
	return nil
}
