#!/usr/bin/env bash
# parity/run.sh [-run REGEXP] [-v] [-candidate-etcd]: build the real kube-apiserver v1.37.2,
# kube-controller-manager v1.37.2 and etcd from the Go module proxy (once; cached outside the repository), replay
# every scenario of parity/scenarios against it and against kubeembed, print
# "N identical, M different" and write parity/PARITY.md. The scenarios of a
# cluster also get kube-scheduler v1.37.2.
#
# A cold build of kube-apiserver takes ~16 minutes and ~2.3 GB on 2 cores;
# later runs reuse the binaries in $KUBEEMBED_PARITY_CACHE
# (default ~/.cache/kubeembed-parity).
set -euo pipefail
cd "$(dirname "$0")"

cache="${KUBEEMBED_PARITY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeembed-parity}"
mkdir -p "$cache"
apiserver="$cache/kube-apiserver-v1.37.2-release"
etcd="$(../hack/etcd.sh)"
# Named as on a cluster: its field manager is its binary's name.
kcm="$cache/kube-controller-manager-v1.37.2/kube-controller-manager"
scheduler="$cache/kube-scheduler-v1.37.2/kube-scheduler"

# The versions come from go.mod; building them through it keeps the
# replace directives of k8s.io/kubernetes inside this module.
if [[ ! -x "$apiserver" ]]; then
	echo "building kube-apiserver v1.37.2 into $cache (first run: ~16 minutes)" >&2
	# Stamped as the release is (hack/lib/version.sh): without it /version
	# reports "v0.0.0-master+$Format:%H$".
	v=k8s.io/component-base/version
	go build -ldflags "-X $v.gitVersion=v1.37.2 -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean" \
		-o "$apiserver.tmp" k8s.io/kubernetes/cmd/kube-apiserver
	mv "$apiserver.tmp" "$apiserver"
fi
if [[ ! -x "$kcm" ]]; then
	echo "building kube-controller-manager v1.37.2 into $cache (first run: ~10 minutes)" >&2
	v=k8s.io/component-base/version
	mkdir -p "$(dirname "$kcm")"
	go build -ldflags "-X $v.gitVersion=v1.37.2 -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean" \
		-o "$kcm.tmp" k8s.io/kubernetes/cmd/kube-controller-manager
	mv "$kcm.tmp" "$kcm"
fi

if [[ ! -x "$scheduler" ]]; then
	echo "building kube-scheduler v1.37.2 into $cache (first run: ~8 minutes)" >&2
	v=k8s.io/component-base/version
	mkdir -p "$(dirname "$scheduler")"
	go build -ldflags "-X $v.gitVersion=v1.37.2 -X $v.gitMajor=1 -X $v.gitMinor=37 -X $v.gitTreeState=clean" \
		-o "$scheduler.tmp" k8s.io/kubernetes/cmd/kube-scheduler
	mv "$scheduler.tmp" "$scheduler"
fi

report=PARITY.md
for a in "$@"; do
	# kubeembed on etcd has a report of its own.
	[[ "$a" == "-candidate-etcd" ]] && report=PARITY-etcd.md
done
for a in "$@"; do
	# A subset does not overwrite the full report.
	[[ "$a" == "-run" ]] && report=""
done
# Run under its cluster name: kube-apiserver names the field manager of
# what it writes itself (the RBAC bootstrap policy...) after its binary.
named="$cache/named/kube-apiserver"
mkdir -p "$(dirname "$named")"
ln -sf "$apiserver" "$named"
exec go run ./cmd/parity -etcd "$etcd" -kube-apiserver "$named" -kube-controller-manager "$kcm" -kube-scheduler "$scheduler" -report "$report" "$@"
