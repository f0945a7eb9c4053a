// Command parity replays parity/scenarios against the real kube-apiserver
// v1.37.2 and against kubeembed, prints "N identical, M different" and
// writes PARITY.md. parity/run.sh builds the binaries it needs and runs it.
package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"regexp"
	"runtime"
	"time"

	"github.com/kubeembed/apiserver/parity/runner"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "parity:", err)
		os.Exit(1)
	}
}

func run() error {
	var (
		etcd      = flag.String("etcd", "", "etcd binary")
		apiserver = flag.String("kube-apiserver", "", "kube-apiserver binary")
		scenarios = flag.String("scenarios", "scenarios", "directory of scenario files")
		report    = flag.String("report", "PARITY.md", "report to write; empty for none")
		runRE     = flag.String("run", "", "only scenarios whose area/name matches this regexp")
		parallel  = flag.Int("parallel", 4, "scenarios run at once")
		verbose   = flag.Bool("v", false, "print every scenario")
		refURL    = flag.String("reference-url", "", "use this running kube-apiserver instead of starting one (development)")
		refToken  = flag.String("reference-token", "", "admin token of -reference-url")
		kcm       = flag.String("kube-controller-manager", "", "kube-controller-manager binary, for the scenarios with controllers")
		scheduler = flag.String("kube-scheduler", "", "kube-scheduler binary, for the scenarios of a cluster")
		dumpDir   = flag.String("dump", "", "write each scenario's normalised responses to this directory")
		onEtcd    = flag.Bool("candidate-etcd", false, "store kubeembed in an etcd process of its own (the reference's binary; watch cache on) instead of memory")
	)
	flag.Parse()
	if (*etcd == "" || *apiserver == "") && *refURL == "" {
		return errors.New("-etcd and -kube-apiserver are required (parity/run.sh builds them)")
	}
	var re *regexp.Regexp
	if *runRE != "" {
		var err error
		if re, err = regexp.Compile(*runRE); err != nil {
			return fmt.Errorf("-run: %w", err)
		}
	}
	list, err := runner.Load(*scenarios, re)
	if err != nil {
		return err
	}
	if len(list) == 0 {
		return fmt.Errorf("no scenario matches %q", *runRE)
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	p := pair{bins: runner.Binaries{Etcd: *etcd, APIServer: *apiserver, ControllerManager: *kcm, Scheduler: *scheduler},
		refURL: *refURL, refToken: *refToken, parallel: *parallel, verbose: *verbose, candidateEtcd: *onEtcd, dump: *dumpDir}
	results, err := p.runAll(ctx, list)
	if err != nil {
		return err
	}
	printResults(results, *verbose)
	if *report == "" {
		return nil
	}
	header := fmt.Sprintf("Written by `parity/run.sh%s` on %s (%s/%s, %d CPUs); %d scenarios in %s.\n",
		runFlag(*runRE), time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(),
		len(list), time.Since(start).Round(time.Second))
	var b bytes.Buffer
	if err := runner.WriteReport(&b, header, results); err != nil {
		return err
	}
	return os.WriteFile(*report, b.Bytes(), 0o644)
}

// printResults prints the differences (and with verbose the rest) and the
// summary line.
func printResults(results []runner.Result, verbose bool) {
	for _, res := range results {
		switch {
		case res.SetupErr != "":
			fmt.Printf("DIFF %s: setup: %s\n", res.Scenario.FullName(), res.SetupErr)
		case !res.Identical():
			fmt.Printf("DIFF %s\n", res.Scenario.FullName())
			for i, s := range res.Steps {
				if s.Diff != "" {
					fmt.Printf("  step %d %s %s:\n%s\n", i+1, s.Step.Verb, s.Step.Path, s.Diff)
				}
			}
		case verbose:
			fmt.Printf("ok   %s\n", res.Scenario.FullName())
		}
	}
	all, _ := runner.Summarise(results)
	fmt.Printf("%d identical, %d different (%.1f%%)\n", all.Identical, all.Different, all.Percent())
}

// runAll runs the scenarios of each mode on a pair of servers of their own:
// those without controllers, those with (kube-controller-manager beside the
// reference), those of a cluster (one at a time).
func (p pair) runAll(ctx context.Context, list []runner.Scenario) ([]runner.Result, error) {
	byMode := map[runner.Mode][]runner.Scenario{}
	for _, sc := range list {
		switch {
		case sc.Cluster:
			byMode[runner.WithCluster] = append(byMode[runner.WithCluster], sc)
		case sc.Controllers:
			byMode[runner.WithControllers] = append(byMode[runner.WithControllers], sc)
		default:
			byMode[runner.Plain] = append(byMode[runner.Plain], sc)
		}
	}
	var results []runner.Result
	for _, mode := range []runner.Mode{runner.Plain, runner.WithControllers, runner.WithCluster} {
		more, err := p.run(ctx, byMode[mode], mode)
		if err != nil {
			return nil, err
		}
		results = append(results, more...)
	}
	return results, nil
}

// pair starts a reference and a candidate and runs scenarios on them.
type pair struct {
	bins             runner.Binaries
	refURL, refToken string
	parallel         int
	verbose          bool
	// candidateEtcd stores kubeembed in the reference's etcd.
	candidateEtcd bool
	dump          string
}

// run runs list on a fresh pair of servers of mode.
func (p pair) run(ctx context.Context, list []runner.Scenario, mode runner.Mode) ([]runner.Result, error) {
	if len(list) == 0 {
		return nil, nil
	}
	token := randomToken()
	dir, err := os.MkdirTemp("", "parity-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	start := time.Now()
	ref := &runner.Reference{Target: runner.Target{Name: "kube-apiserver", URL: p.refURL, Token: p.refToken}}
	if p.refURL == "" || mode != runner.Plain || p.candidateEtcd {
		if ref, err = runner.StartReference(ctx, p.bins, mode, dir, token); err != nil {
			return nil, fmt.Errorf("start kube-apiserver: %w", err)
		}
		defer ref.Stop()
	}
	etcdURL := ""
	if p.candidateEtcd {
		if etcdURL, err = ref.StartEtcd(ctx, p.bins.Etcd, "candidate-etcd"); err != nil {
			return nil, fmt.Errorf("start kubeembed's etcd: %w", err)
		}
	}
	cand, err := runner.StartCandidate(ctx, token, mode, etcdURL)
	if err != nil {
		return nil, fmt.Errorf("start kubeembed: %w", err)
	}
	defer cand.Stop()
	fmt.Printf("servers ready in %s (%s); running %d scenarios\n", time.Since(start).Round(time.Millisecond), mode, len(list))
	_, cidr, _ := net.ParseCIDR(runner.ServiceCIDR)
	fixtures, err := runner.StartFixtures()
	if err != nil {
		return nil, err
	}
	defer fixtures.Close()
	ref.Target.Vars, cand.Target.Vars = fixtures.Vars, fixtures.Vars
	r := &runner.Runner{Reference: &ref.Target, Candidate: &cand.Target, ServiceCIDR: cidr, Parallel: p.parallel, Dump: p.dump}
	if p.verbose {
		// The results are printed in order at the end; this shows the
		// run's progress, and which scenarios are slow, as it goes.
		r.Done = func(res runner.Result, took time.Duration) {
			fmt.Fprintf(os.Stderr, "done %s in %s\n", res.Scenario.FullName(), took.Round(100*time.Millisecond))
			for _, g := range res.GaveUp {
				fmt.Fprintf(os.Stderr, "  gave up waiting: %s\n", g)
			}
		}
	}
	if mode == runner.WithCluster {
		r.Parallel = 1 // a scheduler's answer counts every node
	}
	if p.refURL != "" && mode == runner.Plain {
		r.Salt = token // the reused server keeps the objects of earlier runs
	}
	return r.Run(ctx, list), nil
}

func runFlag(re string) string {
	if re == "" {
		return ""
	}
	return fmt.Sprintf(" -run '%s'", re)
}

func randomToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
