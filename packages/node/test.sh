#!/usr/bin/env bash
# The npm package as a user gets it: its tests, then `npm pack`, and the README's program run
# from a fresh directory outside the repository against the installed tarball.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm test
tarball=$(npm pack --silent | tail -1)
echo "packed $tarball: $(stat -c %s "$tarball") bytes"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mv "$tarball" "$work/"
cp test/readme-program.mjs "$work/program.mjs"
(
  cd "$work"
  npm init -y >/dev/null
  npm install --no-audit --no-fund "./$tarball" >/dev/null
  node program.mjs "$work/memory.db"
)
