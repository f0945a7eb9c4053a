// Package manifests reads manifest files as kubectl and envtest find them:
// a file, or the YAML and JSON files of a directory (not its
// subdirectories), split into their documents. The server's CRDPaths and
// RBACPaths and the envtest drop-in read through it.
package manifests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// extensions are the files a manifest directory is read for.
var extensions = map[string]bool{".yaml": true, ".yml": true, ".json": true}

// Files is path, or the YAML and JSON files of directory path in name
// order.
func Files(path string) ([]string, error) {
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
		if !e.IsDir() && extensions[strings.ToLower(filepath.Ext(e.Name()))] {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	sort.Strings(files)
	return files, nil
}

// Document is one document of a manifest file; N counts from 1, empty
// documents included.
type Document struct {
	Raw []byte
	N   int
}

// Read returns the documents of a YAML or JSON file, skipping those that
// are empty or only comments; errors name the file and the document.
func Read(path string) ([]Document, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []Document
	for n := 1; ; n++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, n, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || onlyComments(raw) {
			continue
		}
		out = append(out, Document{Raw: raw, N: n})
	}
}

func onlyComments(raw []byte) bool {
	for _, line := range bytes.Split(raw, []byte("\n")) {
		l := bytes.TrimSpace(line)
		if len(l) > 0 && l[0] != '#' && !bytes.Equal(l, []byte("---")) {
			return false
		}
	}
	return true
}
