#!/usr/bin/env bash
# The test suite: what the README's test command runs and what CI runs.
#
#   scripts/test.sh            fetch the pinned test assets (best effort), then
#                              go vet, gofmt check, and go test -short ./... ;
#                              when OpenBLAS is installed, also the engine with -tags openblas
#   scripts/test.sh -long      the same without -short (slow: real-data and speed checks)
#   scripts/test.sh -slow      the same beside one busy loop per core, so that every test gets
#                              half the CPU: a machine twice as slow (flags combine)
#
# No test may depend on how fast the machine is. The one test that races a running command
# (cmd/autocompress TestSignalsStopEveryCommand) scales its work as on machines 0.5x, 1x and 4x
# as fast as this one; AUTOCOMPRESS_TEST_SPEED=8,0.25 (say) picks other speeds.
#
# Tests that need ../shared/data or the fetched assets skip with a message when they are absent;
# the run ends with the number of skipped tests and their reasons.
set -euo pipefail
cd "$(dirname "$0")/.."
short=-short
slow=
count=
for arg in "$@"; do
  case $arg in
    -long) short= ;;
    -slow) slow=1 ;;  # with -count=1: a cached result says nothing of a slow machine
    *) echo "usage: scripts/test.sh [-long] [-slow]" >&2; exit 2 ;;
  esac
done
if [ -n "$slow" ]; then
  count=-count=1
  busy=()
  for _ in $(seq "$(nproc)"); do
    (trap 'exit 0' TERM; while :; do :; done) &
    busy+=($!)
  done
  trap 'kill "${busy[@]}" 2>/dev/null || true' EXIT
  echo "== -slow: ${#busy[@]} busy loops beside the tests (half the CPU each: a machine 2x slower)"
fi

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
trap 'rm -rf "$(dirname "$summary")"; [ -z "$slow" ] || kill "${busy[@]}" 2>/dev/null || true' EXIT
go build -o "$summary" ./scripts/testsummary

echo "== go vet"
go vet ./...
echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; exit 1; fi

# Both passes run whatever the first one gives (a failure in the first must
# not hide the second's); the script fails if either did.
failed=
echo "== go test $short ./... (pure-Go sgemm)"
go test $short $count -json -timeout 25m ./... | "$summary" || failed="$failed pure-Go"

if [ -f /usr/include/x86_64-linux-gnu/openblas-pthread/cblas.h ] || [ -f /usr/include/openblas/cblas.h ] || [ -f /usr/include/cblas.h ]; then
  echo "== go test $short -tags openblas (OpenBLAS sgemm) for the packages that compute"
  pkgs=$(go list -tags openblas ./engine/... ./importance/... ./eval/... ./train/... 2>/dev/null || true)
  if [ -n "$pkgs" ]; then
    go test $short $count -tags openblas -json -timeout 15m $pkgs | "$summary" || failed="$failed openblas"
  fi
else
  echo "== OpenBLAS not installed (apt-get install libopenblas-dev): skipping the -tags openblas run"
fi
if [ -n "$failed" ]; then
  echo "test.sh: failed:$failed" >&2
  exit 1
fi
