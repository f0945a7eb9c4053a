package apiservertest_test

import (
	"context"
	"fmt"
	"log"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// ExampleStart lists the namespaces every server starts with. In a test, pass
// the *testing.T (or Ginkgo's GinkgoT()): the server is closed when the test
// ends. Here a minimal TB stands in for it.
func ExampleStart() {
	t := &exampleT{}
	defer t.cleanup()

	srv := apiservertest.Start(t)
	client, err := srv.Clientset()
	if err != nil {
		t.Fatalf("%v", err)
	}
	list, err := client.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("%v", err)
	}
	for _, ns := range list.Items {
		fmt.Println(ns.Name, ns.Status.Phase)
	}
	// Output:
	// default Active
	// kube-node-lease Active
	// kube-public Active
	// kube-system Active
}

// exampleT is the smallest apiservertest.TB.
type exampleT struct{ cleanups []func() }

func (t *exampleT) Helper()                           {}
func (t *exampleT) Cleanup(f func())                  { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Fatalf(format string, args ...any) { log.Fatalf(format, args...) }
func (t *exampleT) Logf(string, ...any)               {}
func (t *exampleT) Context() context.Context          { return context.Background() }

func (t *exampleT) cleanup() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}
