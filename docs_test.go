package apiserver_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/kubeembed/apiserver/controllers"
	"github.com/kubeembed/apiserver/testing/apiservertest"
)

// The docs and the code drift apart quietly; these checks catch the cheap
// cases. docs/architecture.md's hook table must name every post-start hook
// a server lists (controllers' start-<name> hooks are documented as a
// rule), and no hook it says is left out may be listed.
func TestArchitectureDocNamesTheServersHooks(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile("docs/architecture.md")
	require.NoError(t, err)
	section := between(t, string(doc), "## Post-start hooks and health checks", "\nChecks:")
	table, leftOut := splitAt(t, section, "Left out:")

	srv := apiservertest.Start(t)
	listed := map[string]bool{}
	for _, path := range []string{"/healthz", "/livez", "/readyz"} {
		for _, hook := range hooksListed(t, srv.RESTConfig(), path) {
			listed[hook] = true
		}
	}
	require.NotEmpty(t, listed)
	for hook := range listed {
		if name, ok := strings.CutPrefix(hook, "start-"); ok && slices.Contains(controllers.All(), controllers.Name(name)) {
			continue
		}
		assert.Regexp(t, `(^|[\s|,`+"`"+`])`+regexp.QuoteMeta(hook)+`($|[\s|,`+"`"+`])`, table,
			"docs/architecture.md's hook table does not name post-start hook %q", hook)
	}
	for _, m := range regexp.MustCompile("`([a-z0-9/.-]+)`").FindAllStringSubmatch(leftOut, -1) {
		assert.False(t, listed[m[1]], "docs/architecture.md says %q is left out, but the server lists it", m[1])
	}
}

// Every Go file the docs name exists in the tree (by name: the docs name
// files within the package they describe).
func TestDocsNameFilesThatExist(t *testing.T) {
	t.Parallel()
	files := map[string]bool{}
	require.NoError(t, filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files[d.Name()] = true
		}
		return err
	}))
	for _, doc := range []string{"README.md", "docs/architecture.md", "docs/envtest.md"} {
		data, err := os.ReadFile(doc)
		require.NoError(t, err)
		for _, name := range regexp.MustCompile(`\b[a-z][a-z0-9_]*\.go\b`).FindAllString(string(data), -1) {
			assert.True(t, files[name], "%s names %s, which no file of the tree is", doc, name)
		}
	}
}

func between(t *testing.T, s, from, to string) string {
	t.Helper()
	_, after, ok := strings.Cut(s, from)
	require.True(t, ok, "no %q", from)
	before, _, ok := strings.Cut(after, to)
	require.True(t, ok, "no %q after %q", to, from)
	return before
}

func splitAt(t *testing.T, s, sep string) (string, string) {
	t.Helper()
	before, after, ok := strings.Cut(s, sep)
	require.True(t, ok, "no %q", sep)
	return before, after
}
