package apiserver

// Options.RBACPaths: the RBAC manifests a project ships, created at start.

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/kubeembed/apiserver/internal/manifests"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
)

// rbacKinds are the kinds RBACPaths may hold, by apiVersion and kind.
var rbacKinds = map[schema.GroupVersionKind]schema.GroupVersionResource{
	rbacv1.SchemeGroupVersion.WithKind("Role"):               rbacv1.SchemeGroupVersion.WithResource("roles"),
	rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):        rbacv1.SchemeGroupVersion.WithResource("clusterroles"),
	rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):        rbacv1.SchemeGroupVersion.WithResource("rolebindings"),
	rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"): rbacv1.SchemeGroupVersion.WithResource("clusterrolebindings"),
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"):     corev1.SchemeGroupVersion.WithResource("serviceaccounts"),
}

// loadRBAC reads the RBAC objects (and service accounts) of paths, files or
// directories; kustomize's files are skipped, any other kind is an error.
func loadRBAC(paths []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	var errs []error
	for _, p := range paths {
		files, err := manifests.Files(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("options: RBACPaths: %w", err))
			continue
		}
		for _, f := range files {
			objs, err := readRBAC(f)
			if err != nil {
				errs = append(errs, fmt.Errorf("options: RBACPaths: %w", err))
			}
			out = append(out, objs...)
		}
	}
	return out, errors.Join(errs...)
}

func readRBAC(path string) ([]*unstructured.Unstructured, error) {
	if base := filepath.Base(path); base == "kustomization.yaml" || base == "kustomization.yml" {
		return nil, nil
	}
	docs, err := readManifests(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, d := range docs {
		gvk := schema.FromAPIVersionAndKind(d.APIVersion, d.Kind)
		if strings.HasPrefix(gvk.Group, "kustomize.config.k8s.io") {
			continue
		}
		if _, ok := rbacKinds[gvk]; !ok {
			return nil, fmt.Errorf("%s: document %d: %s %q is not an RBAC object (Role, ClusterRole, RoleBinding, ClusterRoleBinding) or a ServiceAccount",
				path, d.doc, d.APIVersion, d.Kind)
		}
		obj := &unstructured.Unstructured{}
		if err := d.decode(&obj.Object); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
	return out, nil
}

// installRBAC creates the objects of Options.RBACPaths, and the namespaces
// they are in when missing (kubebuilder's manifests name the namespace
// "system", which kustomize would rename): created, or updated when they
// exist. The server's own validation and RBAC checks apply, as to kubectl
// apply by an admin.
func (s *Server) installRBAC(ctx context.Context) error {
	if len(s.opts.rbac) == 0 {
		return nil
	}
	dyn, err := s.DynamicClient()
	if err != nil {
		return err
	}
	namespaces, err := s.Clientset()
	if err != nil {
		return err
	}
	var errs []error
	for _, obj := range s.opts.rbac {
		obj = obj.DeepCopy()
		if err := ensureNamespace(ctx, namespaces, obj.GetNamespace()); err != nil {
			errs = append(errs, err)
			continue
		}
		client := dyn.Resource(rbacKinds[obj.GroupVersionKind()]).Namespace(obj.GetNamespace())
		_, err := client.Create(ctx, obj, metav1.CreateOptions{FieldManager: "kubeembed"})
		if apierrors.IsAlreadyExists(err) {
			var have *unstructured.Unstructured
			if have, err = client.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
				obj.SetResourceVersion(have.GetResourceVersion())
				_, err = client.Update(ctx, obj, metav1.UpdateOptions{FieldManager: "kubeembed"})
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("RBACPaths: %s %s: %w", obj.GetKind(), namespacedName(obj), err))
		}
	}
	return errors.Join(errs...)
}

func ensureNamespace(ctx context.Context, client kubernetes.Interface, name string) error {
	if name == "" {
		return nil
	}
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

func namespacedName(obj *unstructured.Unstructured) string {
	if obj.GetNamespace() == "" {
		return obj.GetName()
	}
	return obj.GetNamespace() + "/" + obj.GetName()
}
