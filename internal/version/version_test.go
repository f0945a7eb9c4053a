package version

import (
	"os"
	"regexp"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The release reported must be the one go.mod builds against.
func TestGoModRelease(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^\s*k8s\.io/apiserver v0\.(\d+)\.(\d+)`).FindSubmatch(mod)
	require.NotNil(t, m, "go.mod requires k8s.io/apimachinery")
	assert.Equal(t, "1."+string(m[1])+"."+string(m[2]), Kubernetes())
	assert.Equal(t, "1", Info().Major)
	assert.Equal(t, string(m[1]), Info().Minor)
}

func TestFromBuild(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
		tree string
	}{
		{"no build info", nil, "v1.37.2", ""},
		{"staging module", &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/apimachinery", Version: "v0.37.2"}}}, "v1.37.2", ""},
		{"replaced", &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/apimachinery", Version: "v0.36.0",
			Replace: &debug.Module{Path: "k8s.io/apimachinery", Version: "v0.37.1"}}}}, "v1.37.1", ""},
		{"pre-release", &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/apimachinery", Version: "v0.38.0-alpha.1"}}}, "v1.38.0", ""},
		{"not semver", &debug.BuildInfo{Deps: []*debug.Module{{Path: "k8s.io/apimachinery", Version: "(devel)"}}}, "v1.37.2", ""},
		{"dirty tree", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}}, "v1.37.2", "dirty"},
		{"clean tree", &debug.BuildInfo{Settings: []debug.BuildSetting{{Key: "vcs.modified", Value: "false"}}}, "v1.37.2", "clean"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := fromBuild(tc.bi)
			assert.Equal(t, tc.want, got.GitVersion)
			assert.Equal(t, tc.tree, got.GitTreeState)
		})
	}
}
