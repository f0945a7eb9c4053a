package manifests

// The CRDs and RBAC objects the server's options name by path: documents
// read with their kinds, each kind checked.

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// typed is one document of a manifest file with its kind.
type typed struct {
	metav1.TypeMeta
	raw  []byte
	path string
	doc  int
}

// decode strictly decodes the document into obj, naming it on error.
func (m typed) decode(obj any) error {
	if err := yaml.UnmarshalStrict(m.raw, obj); err != nil {
		return fmt.Errorf("%s: document %d: %w", m.path, m.doc, err)
	}
	return nil
}

// readTyped reads every document of a YAML or JSON file with its kind;
// empty documents are skipped.
func readTyped(path string) ([]typed, error) {
	docs, err := Read(path)
	if err != nil {
		return nil, err
	}
	out := make([]typed, 0, len(docs))
	for _, d := range docs {
		m := typed{raw: d.Raw, path: path, doc: d.N}
		if err := yaml.Unmarshal(d.Raw, &m.TypeMeta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, d.N, err)
		}
		out = append(out, m)
	}
	return out, nil
}

// CRDs returns copies of objs followed by the CRDs in paths (files, or
// directories whose YAML and JSON files are read in name order), reporting
// every bad file and every CRD given twice.
func CRDs(objs []*apiextensionsv1.CustomResourceDefinition, paths []string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	var errs []error
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(objs))
	for i, crd := range objs {
		if crd == nil {
			errs = append(errs, fmt.Errorf("options: CRDs[%d] is nil", i))
			continue
		}
		out = append(out, crd.DeepCopy())
	}
	for _, p := range paths {
		files, err := Files(p)
		if err != nil {
			errs = append(errs, fmt.Errorf("options: CRDPaths: %w", err))
			continue
		}
		for _, f := range files {
			crds, err := readCRDs(f)
			if err != nil {
				errs = append(errs, fmt.Errorf("options: CRDPaths: %w", err))
				continue
			}
			out = append(out, crds...)
		}
	}
	seen := map[string]bool{}
	for _, crd := range out {
		if seen[crd.Name] {
			errs = append(errs, fmt.Errorf("options: CRD %q is given more than once", crd.Name))
		}
		seen[crd.Name] = true
	}
	return out, errors.Join(errs...)
}

// readCRDs reads the CRDs of a YAML or JSON file: anything else is an error
// naming the file and document.
func readCRDs(path string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	docs, err := readTyped(path)
	if err != nil {
		return nil, err
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(docs))
	for _, d := range docs {
		if d.Kind != "CustomResourceDefinition" || d.APIVersion != apiextensionsv1.SchemeGroupVersion.String() {
			return nil, fmt.Errorf("%s: document %d: %s %q is not an %s CustomResourceDefinition",
				path, d.doc, d.APIVersion, d.Kind, apiextensionsv1.SchemeGroupVersion)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := d.decode(crd); err != nil {
			return nil, err
		}
		out = append(out, crd)
	}
	return out, nil
}

// RBACResource is the resource of an RBAC kind a manifest of RBAC may hold
// (Role, ClusterRole, RoleBinding, ClusterRoleBinding, ServiceAccount).
func RBACResource(gvk schema.GroupVersionKind) (schema.GroupVersionResource, bool) {
	var resource string
	switch gvk {
	case rbacv1.SchemeGroupVersion.WithKind("Role"):
		resource = "roles"
	case rbacv1.SchemeGroupVersion.WithKind("ClusterRole"):
		resource = "clusterroles"
	case rbacv1.SchemeGroupVersion.WithKind("RoleBinding"):
		resource = "rolebindings"
	case rbacv1.SchemeGroupVersion.WithKind("ClusterRoleBinding"):
		resource = "clusterrolebindings"
	case corev1.SchemeGroupVersion.WithKind("ServiceAccount"):
		resource = "serviceaccounts"
	default:
		return schema.GroupVersionResource{}, false
	}
	return gvk.GroupVersion().WithResource(resource), true
}

// RBAC reads the RBAC objects (and service accounts) of paths, files or
// directories; kustomize's files are skipped, any other kind is an error.
func RBAC(paths []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	var errs []error
	for _, p := range paths {
		files, err := Files(p)
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
	docs, err := readTyped(path)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, d := range docs {
		gvk := schema.FromAPIVersionAndKind(d.APIVersion, d.Kind)
		if strings.HasPrefix(gvk.Group, "kustomize.config.k8s.io") {
			continue
		}
		if _, ok := RBACResource(gvk); !ok {
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
