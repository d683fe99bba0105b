#!/usr/bin/env bash
# Installs every tool converge's build and tests need, from the package registries only,
# at pinned versions. Idempotent: each step is skipped when the right version is present.
set -euo pipefail
cd "$(dirname "$0")/.."

LEPTOS_VERSION=0.3.10
# The wasm-bindgen CLI must be exactly the version of the crate in Cargo.lock, or the
# generated glue does not match the WebAssembly and the page never hydrates.
WASM_BINDGEN_VERSION=$(awk '/^name = "wasm-bindgen"$/ { getline; gsub(/version = |"/, ""); print; exit }' Cargo.lock)
if [ -z "$WASM_BINDGEN_VERSION" ]; then
  echo "setup: cannot read the wasm-bindgen version from Cargo.lock" >&2
  exit 1
fi
export PATH="$HOME/.cargo/bin:$PATH"

log() { echo "setup: $*" >&2; }

if ! rustup target list --installed | grep -q '^wasm32-unknown-unknown$'; then
  log "adding wasm32-unknown-unknown target"
  rustup target add wasm32-unknown-unknown
fi

# The build tools are compiled without their own release profile's whole-program optimisation:
# cargo-leptos asks for fat LTO and one codegen unit, which made its install 22 of a fresh
# machine's first test run's minutes; a tool that mostly starts other programs loses nothing
# measurable by it (issue 15, build time). Only these installs see the overrides.
fast_install() {
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=1 CARGO_PROFILE_RELEASE_DEBUG=false cargo install "$@"
}

# cargo-leptos compiles about 550 crates, most of them swc's JavaScript tooling, which a build
# here uses only to minify one 30 KB script. So everything is compiled at opt-level 0 but
# cargo-leptos itself (brotli's generic encoder is instantiated in it) and the crates that do
# the build's heavy work: brotli and gzip precompression of about 600 files, wasm-split's
# parser and encoder of the 11 MB WebAssembly. Measured on a fresh machine (2 CPUs,
# 2026-12-02): the install 17.6 min at opt-level 1, 8.4 min this way (BENCHMARKS.md "Build
# time"). Crates named here that a cargo-leptos version does not use are ignored.
leptos_hot="cargo-leptos brotli brotli-decompressor alloc-no-stdlib alloc-stdlib flate2 miniz_oxide
  libflate libflate_lz77 zopfli crc32fast adler2 wasm_split_cli_support wasmparser wasm-encoder"
if ! cargo leptos --version 2>/dev/null | grep -q "$LEPTOS_VERSION"; then
  log "installing cargo-leptos $LEPTOS_VERSION (about 10 min, once)"
  hot=()
  for p in $leptos_hot; do
    level=2
    [ "$p" = cargo-leptos ] && level=1
    hot+=(--config "profile.release.package.$p.opt-level=$level")
  done
  CARGO_PROFILE_RELEASE_LTO=false CARGO_PROFILE_RELEASE_CODEGEN_UNITS=16 \
    CARGO_PROFILE_RELEASE_OPT_LEVEL=0 CARGO_PROFILE_RELEASE_DEBUG=false \
    cargo install "${hot[@]}" cargo-leptos --locked --version "$LEPTOS_VERSION"
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q "$WASM_BINDGEN_VERSION"; then
  log "installing wasm-bindgen-cli $WASM_BINDGEN_VERSION"
  # not --locked: one locked dependency of this version is missing from the registry
  fast_install wasm-bindgen-cli --version "$WASM_BINDGEN_VERSION" --force
fi

# wasm-opt for release builds: npm's binaryen (never Debian's binaryen 108, whose output
# does not hydrate). Kept under tools/ and put first on PATH by the scripts that build.
if ! tools/bin/wasm-opt --version 2>/dev/null | grep -q 'version 132'; then
  log "installing wasm-opt (npm binaryen 132, pinned in tools/package-lock.json)"
  (cd tools && npm ci --no-audit --no-fund --silent)
fi
