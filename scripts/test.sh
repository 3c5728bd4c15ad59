#!/usr/bin/env bash
# The test suite: what the README's test command runs and what CI runs.
#
#   scripts/test.sh            fetch the pinned test assets (best effort), then
#                              go vet, gofmt check, and go test -short ./... ;
#                              when OpenBLAS is installed, also the engine with -tags openblas
#   scripts/test.sh -long      the same without -short (slow: real-data and speed checks)
#
# Tests that need ../shared/data or the fetched assets skip with a message when they are absent;
# the run ends with the number of skipped tests and their reasons.
set -euo pipefail
cd "$(dirname "$0")/.."
short=-short
[ "${1:-}" = "-long" ] && short=

scripts/fetch-assets.sh || echo "test.sh: asset fetch failed; tests that need them will skip" >&2

# Key go test's cache on the shared data: Go does not notice a folder
# outside the module appearing or changing, but it does key on environment
# variables the tests read (internal/shareddata reads both).
if [ -z "${AUTOCOMPRESS_SHARED_DATA:-}" ]; then
  if [ -d ../shared/data ]; then
    AUTOCOMPRESS_SHARED_DATA=$(cd ../shared/data && pwd -P)
  else
    AUTOCOMPRESS_SHARED_DATA=absent
  fi
fi
export AUTOCOMPRESS_SHARED_DATA
if [ -d "$AUTOCOMPRESS_SHARED_DATA" ]; then
  AUTOCOMPRESS_SHARED_DATA_STAMP=$(find -L "$AUTOCOMPRESS_SHARED_DATA" -type f -printf '%P %s %T@\n' 2>/dev/null | sort | cksum | cut -d' ' -f1)
else
  AUTOCOMPRESS_SHARED_DATA_STAMP=absent
fi
export AUTOCOMPRESS_SHARED_DATA_STAMP
echo "== shared data: $AUTOCOMPRESS_SHARED_DATA (stamp $AUTOCOMPRESS_SHARED_DATA_STAMP)"

# go test -json through scripts/testsummary: the usual ok/FAIL lines and
# failed tests' output, then how many tests skipped and why.
summary=$(mktemp -d)/testsummary
trap 'rm -rf "$(dirname "$summary")"' EXIT
go build -o "$summary" ./scripts/testsummary

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

echo "== go test $short ./... (pure-Go sgemm)"
go test $short -json -timeout 25m ./... | "$summary"

if [ -f /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || [ -f /usr/include/openblas/cblas.h ] || [ -f /usr/include/cblas.h ]; then
  echo "== go test $short -tags openblas (OpenBLAS sgemm) for the packages that compute"
  pkgs=$(go list -tags openblas ./engine/... ./importance/... ./eval/... ./train/... 2>/dev/null || true)
  [ -n "$pkgs" ] && go test $short -tags openblas -json -timeout 15m $pkgs | "$summary"
else
  echo "== OpenBLAS not installed (apt-get install libopenblas-dev): skipping the -tags openblas run"
fi
