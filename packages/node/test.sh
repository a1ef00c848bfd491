#!/usr/bin/env bash
# The npm package as a user gets it: its tests, then `npm pack`, and the README's programs run
# from a fresh directory outside the repository against the installed tarball — the core one,
# then, with the pinned frameworks installed beside it, the AI SDK and LangGraph.js ones.
set -euo pipefail
cd "$(dirname "$0")"
npm ci --no-audit --no-fund
npm test
tarball=$(npm pack --silent | tail -1)
echo "packed $tarball: $(stat -c %s "$tarball") bytes"
# The frameworks the extras were tested with (the devDependencies' pins).
frameworks=$(node -e '
  const d = require("./package.json").devDependencies;
  const names = ["ai", "zod", "@ai-sdk/openai-compatible", "@langchain/langgraph", "@langchain/langgraph-checkpoint", "@langchain/core"];
  console.log(names.map((n) => `${n}@${d[n]}`).join(" "));')
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mv "$tarball" "$work/"
cp test/readme-program.mjs "$work/program.mjs"
cp test/extras-program.mjs test/scripted-llm.js "$work/"
(
  cd "$work"
  npm init -y >/dev/null
  npm pkg set type=module
  npm install --no-audit --no-fund "./$tarball" >/dev/null
  node program.mjs "$work/memory.db"
  echo "installing $frameworks"
  npm install --no-audit --no-fund --save-exact $frameworks >/dev/null
  node extras-program.mjs
)
