#!/usr/bin/env bash
# hack/with-etcd.sh COMMAND...: run COMMAND with a real etcd v3.7.3 server
# (hack/etcd.sh) on loopback, its client URL in KUBEEMBED_TEST_ETCD, so that
# apiservertest.Start stores every server of the tests in it. The server
# and its data are gone when COMMAND ends.
#
#	hack/with-etcd.sh go test .
set -euo pipefail
etcd="$("$(dirname "$0")/etcd.sh")"
dir="$(mktemp -d)"
port="${KUBEEMBED_ETCD_PORT:-23790}"
"$etcd" --data-dir "$dir" --listen-client-urls "http://127.0.0.1:$port" --advertise-client-urls "http://127.0.0.1:$port" \
	--listen-peer-urls "http://127.0.0.1:$((port + 10))" --initial-advertise-peer-urls "http://127.0.0.1:$((port + 10))" \
	--initial-cluster "default=http://127.0.0.1:$((port + 10))" --unsafe-no-fsync --log-level error >"$dir.log" 2>&1 &
pid=$!
# The command's status is the script's: etcd's own (143, killed) is not.
trap 'kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null || true; rm -rf "$dir" "$dir.log"' EXIT
for _ in $(seq 100); do
	# The port answers once etcd serves; clients wait for a leader.
	if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
		break
	fi
	if ! kill -0 "$pid" 2>/dev/null; then
		cat "$dir.log" >&2
		exit 1
	fi
	sleep 0.1
done
KUBEEMBED_TEST_ETCD="http://127.0.0.1:$port" "$@"
