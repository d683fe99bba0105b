#!/usr/bin/env bash
# Installs what converge needs to build (pinned), builds the release binary and the console's
# WebAssembly, and starts `converge serve` on http://127.0.0.1:3000 with the embedded SQLite
# database (data/converge.db) and the in-process sandbox channel. Extra arguments go to
# `converge serve` (see `./target/release/converge serve --help`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export PATH="$PWD/tools/bin:$PWD/tools/node_modules/.bin:$HOME/.cargo/bin:$PATH"
cargo leptos build --release --precompress --split
exec ./target/release/converge serve "$@"
