#!/usr/bin/env bash
# Makes the image's build context in DIR from a built `hindsight` binary (default: the one the
# test run built) — no second compile: the binary stripped, the shared libraries it links, the
# embedding model, and the component compiled once by the binary itself (its cache).
#   docker/context.sh DIR [BINARY]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$1"
bin="${2:-$here/../target/debug/hindsight}"
models="${HINDSIGHT_MODELS:-${XDG_CACHE_HOME:-$HOME/.cache}/hindsight/models}"
rm -rf "$out"
root="$out/rootfs"
mkdir -p "$root/usr/local/bin" "$root/models" "$root/cache" "$root/data" "$root/tmp"
cp "$here/Dockerfile" "$out/Dockerfile"
cp "$bin" "$root/usr/local/bin/hindsight"
strip "$root/usr/local/bin/hindsight"
# The loader and every library the binary links, at the paths it looks for them.
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
    mkdir -p "$root$(dirname "$lib")"
    cp -L "$lib" "$root$lib"
done
cp "$models/model.onnx" "$models/tokenizer.json" "$root/models/"
# Compile the component now, into the image's cache, so a container starts at once.
XDG_CACHE_HOME="$root/cache" HINDSIGHT_MODELS="$root/models" \
    "$root/usr/local/bin/hindsight" --db "$out/warm.db" retain --text "warm up" --force >/dev/null
rm -f "$out"/warm.db*
# The server runs as nobody: its data and cache are its own.
chmod -R a+rwX "$root/data" "$root/cache" "$root/tmp"
chmod 1777 "$root/tmp"
du -sh "$root"
