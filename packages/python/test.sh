#!/usr/bin/env bash
# The PyPI package as a user gets it: the wheel (carrying the component) built, installed in a
# fresh virtual environment outside the repository, the issue's program run from there, then the
# tests with that environment's python (they import the installed package, never the sources).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
repo=$(pwd)
pkg=packages/python

wasm=guest/component/hindsight.wasm
[ -f "$wasm" ] || { echo "no $wasm: build it first (./dev component)" >&2; exit 1; }
cp "$wasm" "$pkg/src/hindsight_memory/hindsight.wasm"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m pip wheel -q --no-deps -w "$work/dist" "$pkg"
rm -rf "$pkg/build" "$pkg"/src/*.egg-info
wheel=$(ls "$work"/dist/hindsight_memory-*.whl)

python3 -m venv "$work/venv"
py="$work/venv/bin/python"
# The framework extras from the packed wheel, as a user installs them (their tests need them).
"$py" -m pip install -q --disable-pip-version-check "$wheel[langgraph,openai-agents]" pytest

cp "$pkg/tests/issue_program.py" "$work/program.py"
(cd "$work" && "$py" program.py "$work/memory.db")

"$py" -m pytest -q -p no:cacheprovider "$pkg/tests"

echo "wheel $(basename "$wheel"): $(stat -c %s "$wheel") bytes"
