package envtest_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/rest"
	crenvtest "sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/load"
	"github.com/kubeembed/apiserver/storage"
	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// BenchmarkLoad runs internal/load's workload (64 clients, each with a
// connection of its own, and 64 watches, for KUBEEMBED_LOAD_DURATION,
// default 3 s) against each server side by side in one run: kubeembed on
// memory, the same with in-process clients, kubeembed on etcd (the etcd
// process of KUBEEMBED_TEST_ETCD, hack/with-etcd.sh; else an embedded
// one), and kube-apiserver + etcd as envtest runs them
// (KUBEBUILDER_ASSETS). Every server is a bare control plane (envtest's
// profile, no controllers), with kube-apiserver's default API Priority and
// Fairness configuration; the clients are a user it does not exempt. One
// run per server: -benchtime 1x. The table of each run is logged (-v);
// the metrics are the throughput, p50 and p99 per verb and the 429s.
func BenchmarkLoad(b *testing.B) {
	d := 3 * time.Second
	if v := os.Getenv("KUBEEMBED_LOAD_DURATION"); v != "" {
		var err error
		if d, err = time.ParseDuration(v); err != nil {
			b.Fatal(err)
		}
	}
	for _, s := range loadServers() {
		b.Run(s.name, func(b *testing.B) {
			for b.Loop() {
				runLoad(b, s, d)
			}
		})
	}
}

func runLoad(b *testing.B, s loadServer, d time.Duration) {
	admin, clients, stop := s.start(b)
	defer stop()
	ctx := context.Background()
	if err := load.Prepare(ctx, clientFor(b, admin), "load", "load-clients"); err != nil {
		b.Fatal(err)
	}
	res, err := load.Run(ctx, load.Options{Config: clients, Namespace: "load", Duration: d})
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("%s:\n%s", s.name, res)
	if len(res.Problems) > 0 {
		b.Errorf("%s: %d problems:\n%s", s.name, len(res.Problems), strings.Join(res.Problems, "\n"))
	}
	b.ReportMetric(res.Throughput(), "req/s")
	b.ReportMetric(float64(res.TooMany), "429s")
	for _, v := range load.Verbs() {
		for _, q := range []int{50, 99} {
			if p, n := res.Quantile(v, q); n > 0 {
				b.ReportMetric(float64(p.Microseconds())/1e3, fmt.Sprintf("%s-p%d-ms", v, q))
			}
		}
	}
}

// loadServer starts a server and returns the admin's configuration, the
// load clients' (the user "load" in the group "load-clients") and how to
// stop it.
type loadServer struct {
	name  string
	start func(b *testing.B) (admin, clients *rest.Config, stop func())
}

func loadServers() []loadServer {
	kubeembed := func(name string, inProcess bool, store func(b *testing.B) storage.Backend) loadServer {
		return loadServer{name, func(b *testing.B) (*rest.Config, *rest.Config, func()) {
			var s storage.Backend
			if store != nil {
				s = store(b)
			}
			srv, err := apiserver.New(apiserver.Options{Profile: apiserver.ProfileEnvtest, Storage: s, Controllers: []controllers.Name{}})
			if err != nil {
				b.Fatal(err)
			}
			stop := func() {
				_ = srv.Close()
				if s != nil {
					_ = s.Close()
				}
			}
			if err := srv.Start(context.Background()); err != nil {
				stop()
				b.Fatal(err)
			}
			cfg, err := srv.RESTConfigFor(&user.DefaultInfo{Name: "load", Groups: []string{"load-clients"}})
			if err == nil && inProcess {
				cfg, err = srv.InProcess(cfg)
			}
			if err != nil {
				stop()
				b.Fatal(err)
			}
			return srv.RESTConfig(), cfg, stop
		}}
	}
	out := []loadServer{kubeembed("memory", false, nil), kubeembed("memory-in-process", true, nil)}
	if servers := os.Getenv("KUBEEMBED_TEST_ETCD"); servers != "" {
		out = append(out, kubeembed("etcd", false, func(b *testing.B) storage.Backend {
			s, err := etcd.New(context.Background(), etcd.Options{Servers: strings.Split(servers, ","),
				Prefix: fmt.Sprintf("/load-%d", time.Now().UnixNano())})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}))
	} else {
		out = append(out, kubeembed("embedded-etcd", false, func(b *testing.B) storage.Backend {
			s, err := embedded.NewBackend(context.Background(), embedded.Options{UnsafeNoFsync: true}, etcd.Options{})
			if err != nil {
				b.Fatal(err)
			}
			return s
		}))
	}
	if os.Getenv("KUBEBUILDER_ASSETS") != "" {
		out = append(out, loadServer{"kube-apiserver+etcd", startKubeAPIServer})
	}
	return out
}

func startKubeAPIServer(b *testing.B) (*rest.Config, *rest.Config, func()) {
	te := &crenvtest.Environment{}
	admin, err := te.Start()
	if err != nil {
		b.Fatal(err)
	}
	stop := func() { _ = te.Stop() }
	u, err := te.AddUser(crenvtest.User{Name: "load", Groups: []string{"load-clients"}}, nil)
	if err != nil {
		stop()
		b.Fatal(err)
	}
	return admin, u.Config(), stop
}
