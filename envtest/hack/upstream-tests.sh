#!/usr/bin/env bash
# Runs controller-runtime's own envtest test suite (pkg/envtest/*_test.go, from
# the module cache: the Go module proxy) against this drop-in: the upstream
# tests are copied beside a copy of this package, unchanged, into a scratch
# package that is deleted afterwards; nothing upstream is kept in the repo.
#
# Skipped, with the reason:
#   - binaries_test.go and "Binary Path Handling": they test downloading and
#     locating kube-apiserver/etcd binaries, which the drop-in has none of
#     (the fields are accepted and ignored). A shim gives configureBinaryPaths
#     a body only so that the file compiles.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(go list -m -f '{{.Version}}' sigs.k8s.io/controller-runtime)
upstream=$(go mod download -json "sigs.k8s.io/controller-runtime@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')/pkg/envtest
scratch=internal/upstreamtests
rm -rf "$scratch"
mkdir -p "$scratch"
# The upstream tests need Ginkgo and Gomega, which the drop-in does not: a
# scratch go.mod gets them, the module's own stays as it is.
modfile=$(mktemp -d)/go.mod
cp go.mod "$modfile"
cp go.sum "${modfile%.mod}.sum"
trap 'rm -rf "$scratch" "$(dirname "$modfile")"' EXIT

cp ./*.go "$scratch/"
rm -f "$scratch"/*_test.go
for f in envtest_suite_test.go envtest_test.go webhook_test.go crd_test.go; do
	cp "$upstream/$f" "$scratch/"
done
cp -r "$upstream/testdata" "$scratch/"
chmod -R u+w "$scratch"
cat > "$scratch/shim_test.go" <<'SHIM'
package envtest

// configureBinaryPaths exists only so that envtest_test.go compiles; its
// specs ("Binary Path Handling") are skipped: there are no binaries.
func (te *Environment) configureBinaryPaths() error { return nil }
SHIM

go mod tidy -modfile="$modfile"
go test -modfile="$modfile" "./$scratch" -count=1 -v -args -ginkgo.skip='Binary Path Handling' "$@"
