package runner

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	kubeembed "github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/storage/etcd"
)

// ServiceCIDR is the service range both servers are given.
const ServiceCIDR = "10.0.0.0/24"

// Reference is etcd and kube-apiserver run as child processes, with
// kube-controller-manager, kube-scheduler and kubeembed's simulated kubelet
// and provisioner as its Mode asks.
type Reference struct {
	Target
	// EtcdURL is the client URL of its etcd.
	EtcdURL string
	procs   []*exec.Cmd
	dir     string
	stopSim func()
}

// Mode is what runs beside the API servers.
type Mode int

const (
	// Plain: the API servers alone.
	Plain Mode = iota
	// WithControllers: kube-controller-manager with the controllers of
	// Controllers beside kube-apiserver; kubeembed with those.
	WithControllers
	// WithCluster: pods run. Beside kube-apiserver: kube-controller-manager
	// with ClusterControllers, kube-scheduler, and kubeembed's simulated
	// kubelet and provisioner as clients of it; kubeembed with the same
	// controllers and its own scheduler, kubelet and provisioner. Neither
	// has a node until a scenario adds one.
	WithCluster
)

func (m Mode) String() string { return [...]string{"plain", "controllers", "cluster"}[m] }

// Binaries are the reference's programs.
type Binaries struct {
	Etcd, APIServer, ControllerManager, Scheduler string
}

// StartReference starts etcd and kube-apiserver from bins, with their data
// and logs under dir, and waits until kube-apiserver is ready; then what
// mode runs beside it. The admin is in system:masters; authorization is
// RBAC, as on a cluster built by kubeadm.
func StartReference(ctx context.Context, bins Binaries, mode Mode, dir, token string) (_ *Reference, err error) {
	r := &Reference{dir: dir}
	defer func() {
		if err != nil {
			r.Stop()
		}
	}()
	if r.EtcdURL, err = r.StartEtcd(ctx, bins.Etcd, "etcd"); err != nil {
		return nil, err
	}
	files, err := writeReferenceFiles(dir, token)
	if err != nil {
		return nil, err
	}
	if err := r.startAPIServer(ctx, bins.APIServer, files, token); err != nil {
		return nil, err
	}
	if mode == Plain {
		return r, nil
	}
	if bins.ControllerManager == "" || (mode == WithCluster && bins.Scheduler == "") {
		return nil, fmt.Errorf("%s scenarios need kube-controller-manager's binary, and kube-scheduler's for a cluster (parity/run.sh builds them)", mode)
	}
	list := Controllers
	if mode == WithCluster {
		list += "," + ClusterControllers
	}
	if err := r.startControllerManager(ctx, bins.ControllerManager, files.saKey, list); err != nil {
		return nil, err
	}
	if mode == WithCluster {
		return r, r.startCluster(ctx, bins.Scheduler)
	}
	return r, nil
}

// startAPIServer starts kube-apiserver on etcd and waits until it is
// ready.
func (r *Reference) startAPIServer(ctx context.Context, bin string, files referenceFiles, token string) error {
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	dir := r.dir
	if err := r.start(ctx, "kube-apiserver", bin, append(files.frontProxy,
		"--client-ca-file="+files.clientCA,
		"--etcd-servers="+r.EtcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		// A loopback address cannot be published in the kubernetes Endpoints.
		"--endpoint-reconciler-type=none",
		"--secure-port="+strconv.Itoa(ports[0]),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		// Services are reached at their endpoints, as kubeembed reaches
		// them (it has no cluster IP routing).
		"--enable-aggregator-routing=true",
		"--service-cluster-ip-range="+ServiceCIDR,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file="+files.saKey,
		"--service-account-signing-key-file="+files.saKey,
	)...); err != nil {
		return err
	}
	r.Target = Target{Name: "kube-apiserver", URL: fmt.Sprintf("https://127.0.0.1:%d", ports[0]), Token: token}
	readyCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := r.WaitReady(readyCtx); err != nil {
		return fmt.Errorf("%w (logs in %s)", err, dir)
	}
	return nil
}

// referenceFiles are kube-apiserver's files StartReference writes.
type referenceFiles struct {
	saKey, clientCA string
	frontProxy      []string // the flags naming the front proxy's files
}

// writeReferenceFiles writes the admin's token file, a service account key,
// a client CA (as kubeembed has one, each server its own) and a front proxy
// (as kubeembed has one: its CA, the aggregator's client certificate and
// the request headers).
func writeReferenceFiles(dir, token string) (f referenceFiles, err error) {
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"),
		[]byte(token+","+kubeembed.AdminUser+","+kubeembed.AdminUser+",\"system:masters\"\n"), 0o600); err != nil {
		return f, err
	}
	f.saKey = filepath.Join(dir, "sa.key")
	if err := writeKey(f.saKey); err != nil {
		return f, err
	}
	f.clientCA = filepath.Join(dir, "client-ca.crt")
	if err := writeCA(f.clientCA); err != nil {
		return f, err
	}
	f.frontProxy, err = writeFrontProxy(dir)
	return f, err
}

// Controllers are kube-controller-manager's controllers kubeembed runs, as
// the reference runs them.
const Controllers = "garbagecollector,namespace,serviceaccount,serviceaccount-token,root-ca-cert-publisher,resourcequota,clusterrole-aggregation,validatingadmissionpolicy-status-controller"

// ClusterControllers are those kube-controller-manager runs beside them
// for pods that run: nodes, pods, endpoints, volumes, and the workload
// controllers kubeembed has.
const ClusterControllers = "nodelifecycle,taint-eviction-controller,podgc,endpoint,endpointslice,endpointslicemirroring," +
	"persistentvolume-binder,pvc-protection,pv-protection,ephemeral-volume,persistentvolume-expander,deployment,replicaset,replicationcontroller,statefulset,daemonset,job,cronjob,ttl-after-finished,horizontalpodautoscaling,disruption"

// kubeconfig writes a kubeconfig of the admin for a component.
func (r *Reference) kubeconfig(name string) (string, error) {
	path := filepath.Join(r.dir, name+".kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: r, cluster: {server: %q, insecure-skip-tls-verify: true}}]\n"+
		"users: [{name: admin, user: {token: %q}}]\ncontexts: [{name: r, context: {cluster: r, user: admin}}]\ncurrent-context: r\n", r.URL, r.Token)
	return path, os.WriteFile(path, []byte(kc), 0o600)
}

// startControllerManager runs kube-controller-manager against the
// reference with the controllers of list, as the admin, signing
// secret-based tokens with the service account key.
func (r *Reference) startControllerManager(ctx context.Context, bin, keyFile, list string) error {
	kubeconfig, err := r.kubeconfig("kcm")
	if err != nil {
		return err
	}
	return r.start(ctx, "kube-controller-manager", bin,
		"--kubeconfig="+kubeconfig, "--controllers="+list, "--leader-elect=false", clientRate, clientBurst,
		"--root-ca-file="+filepath.Join(r.dir, "certs", "apiserver.crt"),
		"--service-account-private-key-file="+keyFile,
		"--bind-address=127.0.0.1", "--secure-port=0",
	)
}

// The client rate of the reference's kube-controller-manager and
// kube-scheduler: unlimited in effect, as kubeembed's controllers' and the
// simulated kubelet's clients are. At their defaults (20 and 50 requests a
// second) a burst of pods waits on the scheduler's client
// (BenchmarkPods1000SideBySide); no answer depends on the rate.
const clientRate, clientBurst = "--kube-api-qps=10000", "--kube-api-burst=10000"

// startCluster runs kube-scheduler against the reference, and kubeembed's
// simulated kubelet and provisioner in this process as its clients.
func (r *Reference) startCluster(ctx context.Context, schedulerBin string) error {
	kubeconfig, err := r.kubeconfig("kube-scheduler")
	if err != nil {
		return err
	}
	if err := r.start(ctx, "kube-scheduler", schedulerBin,
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0",
		clientRate, clientBurst,
	); err != nil {
		return err
	}
	k, stop, err := StartSimulation(ctx, &r.Target)
	if err != nil {
		return err
	}
	r.Kubelet, r.stopSim = k, stop
	return nil
}

// StartEtcd starts an etcd process (its data in the reference's directory,
// stopped with it) and returns its client URL: the reference's own, and one
// for kubeembed to store in with -candidate-etcd.
func (r *Reference) StartEtcd(ctx context.Context, bin, name string) (string, error) {
	ports, err := freePorts(2)
	if err != nil {
		return "", err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	peer := fmt.Sprintf("http://127.0.0.1:%d", ports[1])
	return client, r.start(ctx, name, bin,
		"--name=parity", "--data-dir="+filepath.Join(r.dir, name),
		"--listen-client-urls="+client, "--advertise-client-urls="+client,
		"--listen-peer-urls="+peer, "--initial-advertise-peer-urls="+peer,
		"--initial-cluster=parity="+peer, "--unsafe-no-fsync", "--log-level=warn",
	)
}

func (r *Reference) start(ctx context.Context, name, bin string, args ...string) error {
	log, err := os.Create(filepath.Join(r.dir, name+".log"))
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", name, err)
	}
	r.procs = append(r.procs, cmd)
	return nil
}

// Stop ends the simulation, then the processes in the reverse order of
// their start.
func (r *Reference) Stop() {
	if r.stopSim != nil {
		r.stopSim()
		r.stopSim = nil
	}
	for i := len(r.procs) - 1; i >= 0; i-- {
		p := r.procs[i]
		_ = p.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = p.Process.Kill()
			<-done
		}
	}
	r.procs = nil
}

// Candidate is kubeembed, in this process.
type Candidate struct {
	Target
	srv     *kubeembed.Server
	storage *etcd.Backend
}

// StartCandidate starts kubeembed with the built-in groups and mode's
// controllers, in memory, or in the etcd at etcdURL when it is set, as
// kube-apiserver stores: under "/registry", behind the watch cache. It has
// no node until a scenario adds one.
func StartCandidate(ctx context.Context, token string, mode Mode, etcdURL string) (*Candidate, error) {
	opts := kubeembed.Options{AdminToken: token, Controllers: candidateControllers(mode), Nodes: []controllers.Node{}}
	c := &Candidate{}
	if etcdURL != "" {
		b, err := etcd.New(ctx, etcd.Options{Servers: []string{etcdURL}, WatchCache: true})
		if err != nil {
			return nil, err
		}
		opts.Storage, c.storage = b, b
	}
	srv, err := kubeembed.New(opts)
	if err != nil {
		return nil, errors.Join(err, c.closeStorage())
	}
	if err := srv.Start(ctx); err != nil {
		return nil, errors.Join(err, srv.Close(), c.closeStorage())
	}
	c.Target, c.srv = Target{Name: "kubeembed", URL: srv.URL(), Token: token}, srv
	if mode == WithCluster {
		c.Kubelet, c.Settle = srv.Kubelet(), srv.WaitIdle
	}
	return c, nil
}

// candidateControllers are the controllers the reference runs in mode,
// and in a cluster the simulated kubelet, scheduler and provisioner.
func candidateControllers(mode Mode) []controllers.Name {
	var list string
	switch mode {
	case Plain:
		return []controllers.Name{}
	case WithControllers:
		list = Controllers
	case WithCluster:
		list = Controllers + "," + ClusterControllers + "," + strings.Join([]string{
			string(controllers.Kubelet), string(controllers.Scheduler), string(controllers.VolumeProvisioner)}, ",")
	}
	var out []controllers.Name
	for n := range strings.SplitSeq(list, ",") {
		out = append(out, controllers.Name(n))
	}
	return out
}

// Stop closes the server, then its storage.
func (c *Candidate) Stop() error { return errors.Join(c.srv.Close(), c.closeStorage()) }

func (c *Candidate) closeStorage() error {
	if c.storage == nil {
		return nil
	}
	return c.storage.Close()
}

func freePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// writeCA writes a new self-signed CA certificate.
func writeCA(path string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "parity-client-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600)
}

// writeFrontProxy writes a front-proxy CA and the aggregator's client
// certificate into dir and returns kube-apiserver's flags for them, the
// request headers as kubeembed (and kubeadm) name them.
func writeFrontProxy(dir string) ([]string, error) {
	ca, err := certs.NewCA("parity-front-proxy-ca")
	if err != nil {
		return nil, err
	}
	leaf, err := ca.Client("front-proxy-client", "", nil)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{"front-proxy-ca.crt": ca.CertPEM, "front-proxy-client.crt": leaf.CertPEM, "front-proxy-client.key": leaf.KeyPEM}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			return nil, err
		}
	}
	return []string{
		"--requestheader-client-ca-file=" + filepath.Join(dir, "front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + filepath.Join(dir, "front-proxy-client.crt"),
		"--proxy-client-key-file=" + filepath.Join(dir, "front-proxy-client.key"),
	}, nil
}

func writeKey(path string) error {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}
