#!/usr/bin/env bash
# The test suite: what the README's test command runs and what CI runs.
#
#   scripts/test.sh            fetch the pinned test assets (best effort), then
#                              go vet, gofmt check, and go test -short ./... ;
#                              when OpenBLAS is installed, also the engine with -tags openblas
#   scripts/test.sh -long      the same without -short (slow: real-data and speed checks)
#
# Tests that need ../shared/data or the fetched assets skip with a message when they are absent.
set -euo pipefail
cd "$(dirname "$0")/.."
short=-short
[ "${1:-}" = "-long" ] && short=

scripts/fetch-assets.sh || echo "test.sh: asset fetch failed; tests that need them will skip" >&2

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

echo "== go test $short ./... (pure-Go sgemm)"
go test $short -timeout 25m ./...

if [ -f /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || [ -f /usr/include/openblas/cblas.h ] || [ -f /usr/include/cblas.h ]; then
  echo "== go test $short -tags openblas (OpenBLAS sgemm) for the packages that compute"
  pkgs=$(go list -tags openblas ./engine/... ./importance/... ./eval/... ./train/... 2>/dev/null || true)
  [ -n "$pkgs" ] && go test $short -tags openblas -timeout 15m $pkgs
else
  echo "== OpenBLAS not installed (apt-get install libopenblas-dev): skipping the -tags openblas run"
fi
