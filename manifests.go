package apiserver

// Manifest files: the CRDs and RBAC objects Options name by path.

import (
	"fmt"

	"github.com/kubeembed/apiserver/internal/manifests"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// manifest is one document of a manifest file.
type manifest struct {
	metav1.TypeMeta
	raw  []byte
	path string
	doc  int
}

// decode strictly decodes the document into obj, naming it on error.
func (m manifest) decode(obj any) error {
	if err := yaml.UnmarshalStrict(m.raw, obj); err != nil {
		return fmt.Errorf("%s: document %d: %w", m.path, m.doc, err)
	}
	return nil
}

// readManifests reads every document of a YAML or JSON file with its kind;
// empty documents are skipped.
func readManifests(path string) ([]manifest, error) {
	docs, err := manifests.Read(path)
	if err != nil {
		return nil, err
	}
	out := make([]manifest, 0, len(docs))
	for _, d := range docs {
		m := manifest{raw: d.Raw, path: path, doc: d.N}
		if err := yaml.Unmarshal(d.Raw, &m.TypeMeta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, d.N, err)
		}
		out = append(out, m)
	}
	return out, nil
}
