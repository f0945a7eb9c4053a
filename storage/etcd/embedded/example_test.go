package embedded_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver"
	"github.com/kubeembed/apiserver/storage/etcd"
	"github.com/kubeembed/apiserver/storage/etcd/embedded"
)

// A server whose objects outlive it: stored in an etcd embedded in the
// process, in a data directory, with the server's keys beside it. A second
// server on the same directory finds them.
func ExampleNewBackend() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "kubeembed-dev-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	run := func(do func(*apiserver.Server) error) error {
		b, err := embedded.NewBackend(ctx, embedded.Options{DataDir: filepath.Join(dir, "etcd")}, etcd.Options{})
		if err != nil {
			return err
		}
		defer b.Close() // after the server's Close
		srv, err := apiserver.New(apiserver.Options{Storage: b, CertDir: filepath.Join(dir, "pki")})
		if err != nil {
			return err
		}
		defer srv.Close()
		if err := srv.Start(ctx); err != nil {
			return err
		}
		return do(srv)
	}
	err = run(func(srv *apiserver.Server) error {
		c, _ := srv.Clientset()
		_, err := c.CoreV1().ConfigMaps("default").Create(ctx,
			&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		panic(err)
	}
	err = run(func(srv *apiserver.Server) error {
		c, _ := srv.Clientset()
		cm, err := c.CoreV1().ConfigMaps("default").Get(ctx, "kept", metav1.GetOptions{})
		if err == nil {
			fmt.Println("after a restart:", cm.Name, cm.Data["k"])
		}
		return err
	})
	if err != nil {
		panic(err)
	}
	// Output: after a restart: kept v
}
