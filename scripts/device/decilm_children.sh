#!/bin/sh
# Prepares the DeciLM children that decilm_autoconfig.py checks with the real
# transformers: one child of the embedded parent per kind whose configuration
# module prune's TestDeciLMConfigModule exercises with a stand-in for
# transformers (the plans in prune/testdata/remotecode/plans: uniform and
# varying KV groups, attention removed in the first and in the last layer,
# an MLP removed with its attention kept).
#
# STATUS: NOT YET RUN ON A DEVICE (written without one). Run it once where
# transformers is installed and record what it printed in prune/PLAN.md.
#
# usage: scripts/device/decilm_children.sh OUT [--config-only]
#   OUT/<kind>/ gets each child. With --config-only, only config.json and the
#   Python modules are kept (AutoConfig needs nothing else), so that OUT is
#   small enough to carry to a device machine that has no Go toolchain.
#
# Then, where transformers is installed:
#   python3 scripts/device/decilm_autoconfig.py OUT/*
set -eu
out=${1:?usage: $0 OUT [--config-only]}
only=${2:-}
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=$(mktemp -d)/autocompress
(cd "$root" && go build -o "$bin" ./cmd/autocompress)
mkdir -p "$out"
for plan in "$root"/prune/testdata/remotecode/plans/*.json; do
	kind=$(basename "$plan" .json)
	"$bin" prune --model parent --plan "$plan" --out "$out/$kind" --force
	if [ "$only" = --config-only ]; then
		find "$out/$kind" -type f ! -name config.json ! -name '*.py' -delete
	fi
done
ls -R "$out"
