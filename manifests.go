package apiserver

// Manifest files: the CRDs and RBAC objects Options name by path.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// manifestExtensions are the files a manifest directory is read for.
var manifestExtensions = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// manifestFiles is path, or the YAML and JSON files of directory path in
// name order.
func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range entries {
		if !e.IsDir() && manifestExtensions[strings.ToLower(filepath.Ext(e.Name()))] {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	sort.Strings(files)
	return files, nil
}

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
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []manifest
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || isOnlyComments(raw) {
			continue
		}
		m := manifest{raw: raw, path: path, doc: doc}
		if err := yaml.Unmarshal(raw, &m.TypeMeta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, doc, err)
		}
		out = append(out, m)
	}
}

func isOnlyComments(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' && !bytes.Equal(l, []byte("---")) {
			return false
		}
	}
	return true
}
