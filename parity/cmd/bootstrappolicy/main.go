// Command bootstrappolicy writes the RBAC bootstrap policy of the real
// kube-apiserver v1.37.2 (every ClusterRole, ClusterRoleBinding, and the
// Roles and RoleBindings it creates in its system namespaces) as a YAML
// list, stripped of what a server assigns (uid, resourceVersion, times), for kubeembed to create at start as kube-apiserver does:
//
//	go run ./cmd/bootstrappolicy -etcd $cache/etcd-v3.7.3 \
//	    -kube-apiserver $cache/named/kube-apiserver \
//	    -out ../providers/rbac/policy.yaml
//
// parity/run.sh builds the binaries (and links kube-apiserver under its
// cluster name, which names the objects' field manager). The policy is data read from the
// running server, not code copied from k8s.io/kubernetes.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/kubeembed/apiserver/parity/runner"
)

func main() {
	etcd := flag.String("etcd", "", "etcd binary")
	apiserver := flag.String("kube-apiserver", "", "kube-apiserver binary")
	out := flag.String("out", "", "file to write")
	flag.Parse()
	if err := run(context.Background(), *etcd, *apiserver, *out); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, etcd, apiserver, out string) error {
	dir, err := os.MkdirTemp("", "bootstrappolicy")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ref, err := runner.StartReference(ctx, runner.Binaries{Etcd: etcd, APIServer: apiserver}, runner.Plain, dir, "bootstrap-policy-token")
	if err != nil {
		return err
	}
	defer ref.Stop()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: ref.URL, BearerToken: ref.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		return err
	}
	items, err := policy(ctx, c)
	if err != nil {
		return err
	}
	data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	if err != nil {
		return err
	}
	header := "# The RBAC bootstrap policy of kube-apiserver v1.37.2, read from the running\n# server by parity/cmd/bootstrappolicy. Do not edit; regenerate.\n"
	return os.WriteFile(filepath.Clean(out), append([]byte(header), data...), 0o644)
}

// policy lists the four kinds, each object with its kind and without what
// the server assigned.
func policy(ctx context.Context, c kubernetes.Interface) ([]runtime.Object, error) {
	var objs []runtime.Object
	opts := metav1.ListOptions{}
	crs, err := c.RbacV1().ClusterRoles().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range crs.Items {
		objs = append(objs, &crs.Items[i])
	}
	crbs, err := c.RbacV1().ClusterRoleBindings().List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range crbs.Items {
		objs = append(objs, &crbs.Items[i])
	}
	roles, err := c.RbacV1().Roles("").List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range roles.Items {
		objs = append(objs, &roles.Items[i])
	}
	rbs, err := c.RbacV1().RoleBindings("").List(ctx, opts)
	if err != nil {
		return nil, err
	}
	for i := range rbs.Items {
		objs = append(objs, &rbs.Items[i])
	}
	for _, o := range objs {
		if err := strip(o); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

func strip(o runtime.Object) error {
	gvks, _, err := scheme.Scheme.ObjectKinds(o)
	if err != nil {
		return err
	}
	o.GetObjectKind().SetGroupVersionKind(gvks[0])
	m, ok := o.(metav1.Object)
	if !ok {
		return fmt.Errorf("%T has no metadata", o)
	}
	m.SetUID("")
	m.SetResourceVersion("")
	m.SetCreationTimestamp(metav1.Time{})
	// The managers stay (kube-apiserver's, as it created them), without
	// their times: the server sets its own when it creates them.
	fields := m.GetManagedFields()
	for i := range fields {
		fields[i].Time = nil
	}
	m.SetManagedFields(fields)
	m.SetGeneration(0)
	return nil
}
