package fuzz_test

import (
	"context"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/leaktest"
)

const (
	// manifestStart bounds a Start with a manifest: a few hundred ms at
	// most for what is installed, so a Start that takes longer waits for
	// something that will not come.
	manifestStart = 20 * time.Second
	// leakCheckEvery is how many servers FuzzManifests starts between
	// goroutine checks.
	leakCheckEvery = 25
)

// FuzzManifests gives a file to Options.CRDPaths (rbac false) or
// Options.RBACPaths: New or Start must return an error, or the server
// start with what the file holds, answer /readyz and close; never a panic,
// a Start that does not end, or goroutines left after Close. The slowest
// target: a server per valid input (envtest's profile, no priority and
// fairness, to start sooner).
func FuzzManifests(f *testing.F) {
	// The first server starts the libraries' process-wide goroutines.
	if err := startManifest(f, false, nil); err != nil {
		f.Fatalf("a server without manifests: %v", err)
	}
	before := []goleak.Option{leaktest.IgnoreCurrent(f),
		// The fuzzing worker's own, started between inputs.
		goleak.IgnoreTopFunction("os/signal.NotifyContext.func1")}
	// The root package's manifests (what its tests install) are seeds too.
	for _, seed := range []struct {
		rbac bool
		glob string
	}{{false, "crds/*"}, {true, "rbac/*"}, {false, "bad/*"}} {
		files, _ := filepath.Glob(filepath.Join("..", "testdata", seed.glob))
		for _, file := range files {
			if data, err := os.ReadFile(file); err == nil {
				f.Add(seed.rbac, data)
			}
		}
	}
	f.Add(false, []byte(widgetYAML))
	f.Add(false, []byte(widgetYAML+"\n---\n# only a comment\n---\n"+widgetYAML))
	f.Add(false, []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{"name":"x"}}`))
	f.Add(true, []byte(`apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: manager-role}
rules:
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch]
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: controller-manager, namespace: system}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: leader-election, namespace: system}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: leader-election-role}
subjects: [{kind: ServiceAccount, name: controller-manager, namespace: system}]
`))
	f.Add(true, []byte("apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources: [role.yaml]\n"))
	f.Add(true, []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"not-rbac"}}`))
	var n int
	f.Fuzz(func(t *testing.T, rbac bool, data []byte) {
		if err := startManifest(t, rbac, data); err != nil && err.Error() == "" {
			t.Fatalf("an error without a message: %#v", err)
		}
		if n++; n%leakCheckEvery == 0 {
			if err := leaktest.Find(before...); err != nil {
				t.Fatalf("after %d servers: %v", n, err)
			}
		}
	})
	f.Cleanup(func() {
		if err := leaktest.Find(before...); err != nil {
			f.Errorf("after %d servers: %v", n, err)
		}
	})
}

// startManifest starts and closes a server with data as its manifest; a
// server that does not answer /readyz once started, or whose Start does
// not end, fails t.
func startManifest(t testing.TB, rbac bool, data []byte) error {
	t.Helper()
	opts := apiserver.Options{Logger: zap.NewNop(), Profile: apiserver.ProfileEnvtest,
		DisablePriorityAndFairness: true, Controllers: []controllers.Name{}, Nodes: []controllers.Node{}}
	if data != nil {
		path := filepath.Join(t.TempDir(), "manifest.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatalf("%v", err)
		}
		if rbac {
			opts.RBACPaths = []string{path}
		} else {
			opts.CRDPaths = []string{path}
		}
	}
	srv, err := apiserver.New(opts)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), manifestStart)
	defer cancel()
	err = srv.Start(ctx)
	if ctx.Err() != nil {
		t.Fatalf("Start did not end within %v: %v", manifestStart, err)
	}
	if err == nil {
		fx := &fixture{base: srv.URL()}
		if fx.client, err = httpClient(srv); err != nil {
			t.Fatalf("%v", err)
		}
		if a := fx.do(t, http.MethodGet, "/readyz", "", nil); a.code != http.StatusOK {
			t.Fatalf("/readyz after Start: %d %s", a.code, a.body)
		}
	}
	return errors.Join(err, srv.Close())
}
