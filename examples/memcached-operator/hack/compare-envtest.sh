#!/usr/bin/env bash
# hack/compare-envtest.sh: run this project's suites twice, as they are (the
# kubeembed envtest drop-in) and with the import switched back to
# controller-runtime's envtest on the real kube-apiserver v1.37.2 and etcd
# v3.7.3 (built from the Go module proxy by parity/run.sh's build, cached in
# ~/.cache/kubeembed-parity). Prints the wall time of `go test ./...` for
# each: the two suites' test binaries run one after the other (compiling
# and linking are not counted).
set -euo pipefail
cd "$(dirname "$0")/.."
project=$PWD
repo=$(cd ../.. && pwd)
cache="${KUBEEMBED_PARITY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeembed-parity}"
runs=${RUNS:-3}

# The binaries envtest runs, as setup-envtest lays them out.
if [[ ! -x "$cache/kube-apiserver-v1.37.2-release" || ! -x "$cache/etcd-v3.7.3" ]]; then
	echo "building kube-apiserver and etcd (first run: ~16 minutes)" >&2
	"$repo/parity/run.sh" -run '^$' >/dev/null
fi
assets=$(mktemp -d)
copy=$(mktemp -d)
trap 'rm -rf "$assets" "$copy"' EXIT
ln -s "$cache/kube-apiserver-v1.37.2-release" "$assets/kube-apiserver"
ln -s "$cache/etcd-v3.7.3" "$assets/etcd"

# The same project with the one import switched back.
cp -r "$project/." "$copy/"
sed -i "s|=> ../..$|=> $repo|; s|=> ../../envtest$|=> $repo/envtest|" "$copy/go.mod"
grep -rl 'github.com/kubeembed/apiserver/envtest"' "$copy" --include='*_test.go' |
	xargs sed -i 's|"github.com/kubeembed/apiserver/envtest"|"sigs.k8s.io/controller-runtime/pkg/envtest"|'
(cd "$copy" && go mod tidy >/dev/null 2>&1)

# time_suites DIR [ENV...]: the wall time in ms of running DIR's test
# binaries one after the other (built beforehand: linking is not counted).
time_suites() {
	local dir=$1
	shift
	local bin pkg start end
	bin=$(mktemp -d)
	for pkg in internal/controller internal/webhook/v1; do
		(cd "$dir" && go test -c -o "$bin/$(basename "$pkg").test" "./$pkg")
	done
	start=$(date +%s%N)
	for pkg in internal/controller internal/webhook/v1; do
		(cd "$dir/$pkg" && env "$@" "$bin/$(basename "$pkg").test" >/dev/null)
	done
	end=$(date +%s%N)
	rm -rf "$bin"
	echo $(((end - start) / 1000000))
}

echo "the suites' wall time (ms), test binaries built beforehand; $(nproc) cores"
for i in $(seq "$runs"); do
	k=$(time_suites "$project")
	e=$(time_suites "$copy" KUBEBUILDER_ASSETS="$assets")
	echo "run $i: kubeembed drop-in $k ms, envtest (kube-apiserver + etcd) $e ms"
done
