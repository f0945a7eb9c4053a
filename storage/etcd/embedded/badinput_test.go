package embedded_test

import (
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/kubeembed/apiserver/internal/certs"
	"github.com/kubeembed/apiserver/internal/globals"
	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// Tests here start etcd with embed directly too, whose gRPC clients log
// through klog: set its logger before any of them (a data race otherwise).
func init() { globals.InitKlog() }

// Nothing answers: New fails after DialTimeout with the servers in the
// error.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	start := time.Now()
	_, err := etcd.New(t.Context(), etcd.Options{Servers: []string{"http://127.0.0.1:1"}, DialTimeout: 500 * time.Millisecond})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "etcd [http://127.0.0.1:1] did not answer within 500ms")
	assert.Less(t, time.Since(start), 5*time.Second)
}

// An etcd serving TLS with a certificate another CA signed: New fails after
// DialTimeout, and says why.
func TestWrongCA(t *testing.T) {
	t.Parallel()
	cfg := embed.NewConfig()
	cfg.Dir = t.TempDir()
	cfg.ClientAutoTLS, cfg.PeerAutoTLS = true, true
	u := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{u}, []url.URL{u}
	p := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{p}, []url.URL{p}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	<-e.Server.ReadyNotify()

	ca, err := certs.NewCA("not-etcds-ca")
	require.NoError(t, err)
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	require.NoError(t, os.WriteFile(caFile, ca.CertPEM, 0o600))
	_, err = etcd.New(t.Context(), etcd.Options{Servers: []string{"https://" + e.Clients[0].Addr().String()},
		CAFile: caFile, DialTimeout: time.Second})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "did not answer within 1s")
	assert.Contains(t, err.Error(), "certificate signed by unknown authority")
}

// A prefix holding keys no Kubernetes API server wrote is refused, and New
// writes nothing.
func TestForeignPrefix(t *testing.T) {
	t.Parallel()
	s, err := embedded.Start(t.Context(), embedded.Options{UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	client, err := clientv3.New(clientv3.Config{Endpoints: s.ClientURLs()})
	require.NoError(t, err)
	defer client.Close()
	_, err = client.Put(t.Context(), "/registry/config", "mode=fast")
	require.NoError(t, err)
	put, err := client.Get(t.Context(), "/registry/config")
	require.NoError(t, err)

	_, err = etcd.New(t.Context(), etcd.Options{Servers: s.ClientURLs()})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `etcd prefix "/registry" holds a key no Kubernetes API server wrote ("/registry/config": not <prefix>/<resource>/[<namespace>/]<name>)`)
	after, err := client.Get(t.Context(), "/registry/config")
	require.NoError(t, err)
	assert.Equal(t, put.Header.Revision, after.Header.Revision, "nothing written")

	b, err := etcd.New(t.Context(), etcd.Options{Servers: s.ClientURLs(), Prefix: "/other"})
	require.NoError(t, err, "another prefix is free")
	require.NoError(t, b.Close())
}

// A data directory in use by a running member is refused at once.
func TestDataDirInUse(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, err := embedded.Start(t.Context(), embedded.Options{DataDir: dir, UnsafeNoFsync: true})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = embedded.Start(t.Context(), embedded.Options{DataDir: dir})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "data directory "+dir+" is in use by another server")
	require.NoError(t, s.Close())
	s2, err := embedded.Start(t.Context(), embedded.Options{DataDir: dir, UnsafeNoFsync: true})
	require.NoError(t, err, "free again after Close")
	require.NoError(t, s2.Close())
}

// An etcd requiring client certificates (mutual TLS): New connects with the
// CA, certificate and key files, and fails, saying why, without the client
// certificate.
func TestMutualTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca, err := certs.NewCA("etcd-ca")
	require.NoError(t, err)
	write := func(name string, data []byte) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, data, 0o600))
		return p
	}
	serving, err := ca.Serving("127.0.0.1")
	require.NoError(t, err)
	client, err := ca.Client("kube-apiserver", "", nil)
	require.NoError(t, err)
	caFile := write("ca.crt", ca.CertPEM)

	cfg := embed.NewConfig()
	cfg.Dir = filepath.Join(dir, "etcd")
	u := url.URL{Scheme: "https", Host: "127.0.0.1:0"}
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{u}, []url.URL{u}
	p := url.URL{Scheme: "http", Host: "127.0.0.1:0"}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{p}, []url.URL{p}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	cfg.ClientTLSInfo.CertFile, cfg.ClientTLSInfo.KeyFile = write("etcd.crt", serving.CertPEM), write("etcd.key", serving.KeyPEM)
	cfg.ClientTLSInfo.TrustedCAFile, cfg.ClientTLSInfo.ClientCertAuth = caFile, true
	cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(zap.NewNop())
	e, err := embed.StartEtcd(cfg)
	require.NoError(t, err)
	t.Cleanup(e.Close)
	<-e.Server.ReadyNotify()
	servers := []string{"https://" + e.Clients[0].Addr().String()}

	b, err := etcd.New(t.Context(), etcd.Options{Servers: servers, CAFile: caFile,
		CertFile: write("client.crt", client.CertPEM), KeyFile: write("client.key", client.KeyPEM), DialTimeout: 10 * time.Second})
	require.NoError(t, err)
	require.NoError(t, b.Check(t.Context()))
	require.NoError(t, b.Close())

	_, err = etcd.New(t.Context(), etcd.Options{Servers: servers, CAFile: caFile, DialTimeout: time.Second})
	require.Error(t, err, "no client certificate")
	assert.Contains(t, err.Error(), "did not answer within 1s")
}
