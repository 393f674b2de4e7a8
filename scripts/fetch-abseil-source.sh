#!/usr/bin/env bash
# Fetches Debian's Abseil source (the upstream tarball with Debian's patches
# applied, through `apt-get source` and `dpkg-source -x`) for a build that
# links Abseil statically into libvyre_cuda.so (-DVYRE_CUDA_STATIC_ABSL=ON, the
# `release` preset). Nothing is vendored into the repository: the source is
# cached in a git-ignored folder and reused.
#
#   scripts/fetch-abseil-source.sh [DIR]
#
# DIR (default: $VYRE_CUDA_ABSL_SOURCE_DIR, else .deps/src) receives
# abseil-<Debian version>/. The version is the one of the installed libabsl-dev
# (so the self-contained library is built from the code the system's headers
# describe), else the newest the apt sources offer. Idempotent: a tree of that
# version already there is kept, and with no apt at all (the GPU machine, which
# gets a copied .deps/) any abseil-*/ tree already there is used as it is.
# Prints the tree's path last.
#
# No deb-src entry needs to exist: a source list is derived from the machine's
# own deb sources into a temporary folder, used for this download only (as
# ../shared/gpu/stage-deps.sh does). Needs dpkg-dev (dpkg-source), which
# scripts/bootstrap-debian.sh installs.
set -euo pipefail
cd "$(dirname "$0")/.."
dir="${1:-${VYRE_CUDA_ABSL_SOURCE_DIR:-.deps/src}}"
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)

# An abseil tree is a folder with absl/base/options.h and a CMakeLists.txt.
is_tree() { [ -f "$1/absl/base/options.h" ] && [ -f "$1/CMakeLists.txt" ]; }

# DIR itself may be a tree (VYRE_CUDA_ABSL_SOURCE_DIR=/path/to/abseil-x).
if is_tree "$dir"; then
  echo "$dir"
  exit 0
fi

want=""
if command -v dpkg-query > /dev/null; then
  want=$(dpkg-query -W -f='${source:Version}' libabsl-dev 2>/dev/null || true)
fi
if [ -n "$want" ] && is_tree "$dir/abseil-$want"; then
  echo "$dir/abseil-$want"
  exit 0
fi

# No apt here (or nothing to compare with): any tree already there will do.
existing=$(ls -d "$dir"/abseil-*/ 2>/dev/null | sort -V | tail -1 || true)
existing="${existing%/}"
if ! command -v apt-get > /dev/null || ! command -v dpkg-source > /dev/null; then
  if [ -n "$existing" ] && is_tree "$existing"; then
    echo "$existing"
    exit 0
  fi
  if ! command -v apt-get > /dev/null; then
    echo "fetch-abseil-source.sh: no Abseil source in $dir and no apt-get to fetch it. Fix: copy" \
         "a .deps/src/abseil-*/ tree from a Debian machine (run this script there) into $dir," \
         "or point VYRE_CUDA_ABSL_SOURCE_DIR at an Abseil source tree." >&2
  else
    echo "fetch-abseil-source.sh: dpkg-source not found: it unpacks Debian's source package." \
         "Fix: apt-get install dpkg-dev (scripts/bootstrap-debian.sh does)." >&2
  fi
  exit 1
fi
if [ -z "$want" ] && [ -n "$existing" ] && is_tree "$existing"; then
  echo "$existing"
  exit 0
fi

# A deb-src list derived from this machine's deb sources (deb822 *.sources
# files and one-line sources.list entries), with its own lists folder, so the
# system's apt state is left as it is.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/parts" "$tmp/lists/partial" "$tmp/download" "$tmp/unpack"
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] && sed -E 's/^Types:.*\bdeb\b.*$/Types: deb-src/' "$f" > "$tmp/parts/$(basename "$f")"
done
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] && sed -nE 's/^[[:space:]]*deb([[:space:]])/deb-src\1/p' "$f" >> "$tmp/parts/derived.list"
done
opts=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$tmp/parts"
      -o Dir::State::Lists="$tmp/lists" -o APT::Sandbox::User=root)
if ! apt-get "${opts[@]}" -qq update > "$tmp/update.log" 2>&1; then
  cat "$tmp/update.log" >&2
  echo "fetch-abseil-source.sh: apt-get update of the derived deb-src list failed (log above)." \
       "Fix: check the network and /etc/apt/sources*, or copy a .deps/src/abseil-*/ tree" \
       "into $dir." >&2
  exit 1
fi
fetch() { (cd "$tmp/download" && apt-get "${opts[@]}" -qq source --download-only "$1") \
            > "$tmp/source.log" 2>&1; }
package="abseil${want:+=$want}"
if ! fetch "$package"; then
  # The installed libabsl-dev's exact revision may be gone from the archive
  # (a newer stable update replaced it): the same upstream version will do,
  # the library compiles against the tree's own headers.
  if [ -n "$want" ] && fetch abseil; then
    echo "fetch-abseil-source.sh: $package is no longer in the apt sources; took the" \
         "archive's abseil instead (libabsl-dev $want is installed)." >&2
  else
    cat "$tmp/source.log" >&2
    echo "fetch-abseil-source.sh: apt-get source $package failed (log above). Fix: check the" \
         "network and that the apt sources carry Abseil (apt-cache policy libabsl-dev)." >&2
    exit 1
  fi
fi
dsc=$(ls "$tmp"/download/abseil_*.dsc | head -1)
version=$(sed -n 's/^Version: //p' "$dsc" | head -1)
# Unpacked in the temporary folder (dpkg-source leaves the tarballs beside
# the tree it writes), then moved in: an interrupted run leaves no half tree.
dpkg-source -x "$dsc" "$tmp/unpack/abseil-$version" > "$tmp/unpack.log" 2>&1 || {
  cat "$tmp/unpack.log" >&2
  echo "fetch-abseil-source.sh: dpkg-source -x $(basename "$dsc") failed (log above)." >&2
  exit 1
}
rm -rf "$dir/abseil-$version" "$dir/.abseil-$version.partial"
mv "$tmp/unpack/abseil-$version" "$dir/.abseil-$version.partial"
mv "$dir/.abseil-$version.partial" "$dir/abseil-$version"
echo "fetch-abseil-source.sh: Debian's Abseil $version (patches applied) in $dir/abseil-$version" >&2
echo "$dir/abseil-$version"
