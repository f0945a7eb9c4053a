#!/usr/bin/env bash
# hack/fuzz.sh: run each fuzz target of ./fuzz/ for FUZZTIME (default 10s),
# one after the other, and print the execs each ran. A crasher fails the
# run; go writes it to fuzz/testdata/fuzz/<Target>/, where it becomes a
# seed of plain go test (RELIABILITY.md says what to do with it).
#   FUZZTIME=60s FUZZPARALLEL=2 FUZZMINIMIZETIME=100x hack/fuzz.sh [Target...]
set -uo pipefail
cd "$(dirname "$0")/.."
fuzztime="${FUZZTIME:-10s}"
# Go minimizes every input that finds new coverage before fuzzing on, for
# up to 60 s by default: with a server's requests per input (FuzzCRDSchema:
# ~30 ms) that took whole runs (19 execs, then minimizing until the end).
# A count bounds it by the target's speed; a crasher is written either way.
minimize="${FUZZMINIMIZETIME:-100x}"
parallel=()
[[ -n "${FUZZPARALLEL:-}" ]] && parallel=(-parallel "$FUZZPARALLEL")
targets=("$@")
if [[ ${#targets[@]} -eq 0 ]]; then
	targets=($(go test -list '^Fuzz' ./fuzz/ | grep '^Fuzz'))
fi
log="$(mktemp)"
trap 'rm -f "$log"' EXIT
failed=()
summary=()
for t in "${targets[@]}"; do
	start=$SECONDS
	if go test -run '^$' -fuzz "^${t}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimize" "${parallel[@]}" ./fuzz/ >"$log" 2>&1; then
		result=ok
	else
		result=FAIL
		failed+=("$t")
		cat "$log"
	fi
	# go prints "fuzz: elapsed: 10s, execs: 1234 (123/sec), new interesting: ..."
	execs="$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)"
	summary+=("$(printf '%-16s %-4s execs %-8s %3ds' "$t" "$result" "${execs:-?}" $((SECONDS - start)))")
	echo "${summary[-1]}"
done
echo "--- fuzz summary (FUZZTIME=$fuzztime)"
printf '%s\n' "${summary[@]}"
if [[ ${#failed[@]} -gt 0 ]]; then
	echo "failed: ${failed[*]}; crashers are in fuzz/testdata/fuzz/<Target>/ (git status shows them)" >&2
	exit 1
fi
