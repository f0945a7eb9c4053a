package envtest_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kubeembed/apiserver/envtest"
)

// An envtest suite's setup, unchanged but for the import: Start installs
// the CRDs and returns the admin's configuration. The control plane is
// envtest's: no service account in the default namespace.
func ExampleEnvironment() {
	te := &envtest.Environment{CRDDirectoryPaths: []string{"testdata/crds"}, ErrorIfCRDPathMissing: true}
	cfg, err := te.Start()
	if err != nil {
		log.Fatal(err)
	}
	defer func() {
		if err := te.Stop(); err != nil {
			log.Fatal(err)
		}
	}()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	var sas corev1.ServiceAccountList
	if err := c.List(context.Background(), &sas, client.InNamespace("default")); err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(te.CRDs), "CRDs installed,", len(sas.Items), "service accounts in default")
	// Output: 2 CRDs installed, 0 service accounts in default
}
