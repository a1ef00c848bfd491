#!/usr/bin/env bash
# Prepares the Python environment that the peer benchmarks (chroma_peer.py) run in, and prints
# that environment's python on its last line of stdout; everything else goes to stderr so that a
# caller can take the path with `tail -n1`.
#
# The venv lives outside the work tree (a cache, like the embedding model) and is reused: once a
# marker holding the hash of the pinned requirements matches, this returns at once. Changing a
# pin below changes the hash, and the next run installs the new set into the same venv.
#
#   HINDSIGHT_PEERS_VENV  where the venv goes (default: $XDG_CACHE_HOME/hindsight/peers-venv)
#   PYTHON                the interpreter that creates it (default: python3)
set -euo pipefail

venv="${HINDSIGHT_PEERS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/hindsight/peers-venv}"
python="${PYTHON:-python3}"

# Exact versions, tested together on CPython 3.11 / x86_64 Linux: a peer's figures are only
# comparable across runs if the peer itself does not move underneath them.
requirements=(
    "chromadb==1.5.9"
    "onnxruntime==1.32.0"
    "tokenizers==0.23.3"
    "numpy==2.4.6"
)

stamp="$(printf '%s\n' "${requirements[@]}" | sha256sum | cut -d' ' -f1)"
marker="$venv/.hindsight-peers-requirements"

if [[ -x "$venv/bin/python" && -f "$marker" && "$(<"$marker")" == "$stamp" ]]; then
    echo "$venv/bin/python"
    exit 0
fi

if ! "$venv/bin/python" -c '' 2>/dev/null; then
    # Missing, or left behind by an interpreter that has since gone: start over.
    echo "peers: creating venv at $venv" >&2
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv --clear "$venv" >&2
fi

echo "peers: installing ${requirements[*]}" >&2
rm -f "$marker"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${requirements[@]}" >&2
# A wheel that installs but cannot load (a missing system library) should fail here, not
# halfway through a benchmark.
"$venv/bin/python" -c 'import chromadb, onnxruntime, tokenizers, numpy' >&2

echo "$stamp" >"$marker"
echo "$venv/bin/python"
