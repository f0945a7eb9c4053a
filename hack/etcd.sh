#!/usr/bin/env bash
# hack/etcd.sh: print the path of an etcd v3.7.3 server binary, built once
# from the Go module proxy into $KUBEEMBED_PARITY_CACHE (default
# ~/.cache/kubeembed-parity). It is built through parity/go.mod, which pins
# the version, so that etcd's module graph never enters the root module.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cache="${KUBEEMBED_PARITY_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kubeembed-parity}"
mkdir -p "$cache"
etcd="$cache/etcd-v3.7.3"
if [[ ! -x "$etcd" ]]; then
	echo "building etcd v3.7.3 into $cache" >&2
	(cd "$root/parity" && go build -o "$etcd.tmp" go.etcd.io/etcd/server/v3)
	mv "$etcd.tmp" "$etcd"
fi
echo "$etcd"
