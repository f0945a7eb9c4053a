// Package version says which Kubernetes release kubeembed serves. It is
// derived from the build: the k8s.io/apimachinery module the binary was built
// with (v0.X.Y is Kubernetes v1.X.Y, as every staging module is versioned),
// so the version a server reports cannot drift from the code it runs.
//
// Test binaries carry no module information (go test records none), so there
// the release falls back to goModRelease, which a test holds equal to this
// module's go.mod.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apimachineryversion "k8s.io/apimachinery/pkg/version"
)

// stagingModule is the module whose version names the release; this
// package imports it, so every binary that reports a version links it.
const stagingModule = "k8s.io/apimachinery"

var info = sync.OnceValue(func() apimachineryversion.Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(bi)
})

// Info is what /version answers: kube-apiserver's fields for the release
// kubeembed serves, with kubeembed's own commit, tree state and build date
// when the build recorded them.
func Info() apimachineryversion.Info { return info() }

// Kubernetes is the release served, such as "1.37.2".
func Kubernetes() string { return strings.TrimPrefix(info().GitVersion, "v") }

// goModRelease is the release of the staging modules go.mod requires
// (TestGoModRelease fails when they differ).
const goModRelease = "1.37.2"

// fromBuild reads the release from bi, or goModRelease when bi does not
// list the staging module.
func fromBuild(bi *debug.BuildInfo) apimachineryversion.Info {
	v := utilversion.MustParseSemantic(goModRelease)
	out := apimachineryversion.Info{BuildDate: "1970-01-01T00:00:00Z",
		GoVersion: runtime.Version(), Compiler: runtime.Compiler, Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi != nil {
		for _, d := range bi.Deps {
			if d.Path != stagingModule {
				continue
			}
			if d.Replace != nil && d.Replace.Version != "" {
				d = d.Replace
			}
			if s, err := utilversion.ParseSemantic(d.Version); err == nil && s.Major() == 0 {
				v = utilversion.MajorMinor(1, s.Minor()).WithPatch(s.Patch())
			}
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				out.GitCommit = s.Value
			case "vcs.time":
				out.BuildDate = s.Value
			case "vcs.modified":
				out.GitTreeState = map[string]string{"true": "dirty", "false": "clean"}[s.Value]
			}
		}
	}
	out.Major, out.Minor = fmt.Sprint(v.Major()), fmt.Sprint(v.Minor())
	out.EmulationMajor, out.EmulationMinor = out.Major, out.Minor
	prev := v.SubtractMinor(1)
	out.MinCompatibilityMajor, out.MinCompatibilityMinor = fmt.Sprint(prev.Major()), fmt.Sprint(prev.Minor())
	out.GitVersion = "v" + v.String()
	return out
}
