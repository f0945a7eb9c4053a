package apiservertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/storage/etcd"
)

// EtcdEnv names the environment variable that makes Start store in an etcd
// cluster: its client URLs, comma-separated ("http://127.0.0.1:2379").
// Each server gets a prefix of its own, whose keys are deleted when the
// test ends, so tests in parallel share one cluster without seeing each
// other. A test that sets Options.Storage keeps its own. Unset: memory.
//
// KUBEEMBED_TEST_ETCD_WATCH_CACHE=true puts the watch cache in front, as
// kube-apiserver runs.
const EtcdEnv = "KUBEEMBED_TEST_ETCD"

// storeInTestEtcd points o at the cluster EtcdEnv names, if any.
func storeInTestEtcd(t TB, o *apiserver.Options) error {
	servers := os.Getenv(EtcdEnv)
	if servers == "" || o.Storage != nil {
		return nil
	}
	b, err := etcd.New(t.Context(), etcd.Options{
		Servers:    strings.Split(servers, ","),
		Prefix:     "/kubeembed-test/" + randomName(),
		WatchCache: os.Getenv(EtcdEnv+"_WATCH_CACHE") == "true",
	})
	if err != nil {
		return err
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := b.Client().Delete(ctx, b.Prefix()+"/", clientv3.WithPrefix())
		if err := errors.Join(err, b.Close()); err != nil {
			t.Logf("apiservertest: etcd: %v", err)
		}
	})
	o.Storage = b
	return nil
}

func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
