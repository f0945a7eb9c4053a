#!/usr/bin/env bash
# hack/quickstart.sh: run the README's quick start as a new user pastes it:
# its Go test in a fresh module that depends on this checkout the way the
# README says (its sh block), then go test.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
dir="$(mktemp -d)"
trap 'rm -rf "$dir"' EXIT
section="$(awk '/^## Quick start in a Go test/{on=1; next} /^## /{on=0} on' "$repo/README.md")"
# The first go block is the test, the first sh block the commands.
awk '/^```go$/{on=1; next} /^```$/{if (on) exit} on' <<<"$section" >"$dir/quickstart_test.go"
awk '/^```sh$/{on=1; next} /^```$/{if (on) exit} on' <<<"$section" | sed "s#=\.\./apiserver#=$repo#" >"$dir/setup.sh"
[[ -s "$dir/quickstart_test.go" && -s "$dir/setup.sh" ]] || { echo "quickstart: no go or sh block in the README's quick start" >&2; exit 1; }
cd "$dir"
go mod init example.com/quickstart >/dev/null 2>&1
bash -euo pipefail setup.sh
go vet ./...
go test -count=1 ./...
