#!/usr/bin/env bash
# Makes sure the external binaries the project runs exist, building them once into a cache
# outside the checkout so that fresh clones (CI) reuse them. Progress goes to stderr;
# stdout gets one "name=path" line per tool.
#   usage: scripts/ensure-tools.sh [node] [temporal] [stripe-mock] [toxiproxy-server] [postgres] [chromium]   (default: all)
# node prints the directory of a Node 22.12+ binary: the machine's when it is recent enough, else Node 24 from
# the npm registry's node-linux-<arch> package, in the cache (scripts/use-node.sh puts it on PATH). postgres
# prints the directory of PostgreSQL's server binaries (initdb, pg_ctl), and chromium the browser the Web UI
# test drives; both are installed from Debian's packages when missing and this runs as root.
set -euo pipefail

TOOLS_DIR="${DURABLE_REFUNDS_TOOLS:-$HOME/.cache/durable-refunds/bin}"
TEMPORAL_CLI_VERSION=v1.5.1   # newest cli tag that `go install` accepts (later tags carry a replace)
STRIPE_MOCK_VERSION=v0.203.0
TOXIPROXY_VERSION=v2.12.0     # pinned: the proxy's @latest resolves to an old one
NODE_MIN=22.12                # package.json's engines: commander 15, kysely 0.29 and better-sqlite3 13 need Node 22
NODE_VERSION=24.22.3          # Node 24 LTS, installed when the machine's Node is older
# The tarballs' SHA-512 as tested (npm's dist.integrity): a registry that serves other bytes is refused.
NODE_SHA512_x64=KHsob+Fv9YerATvYujMbiyJqnRCvLtrcr/eTNqRqiOSGp97EOiRP1yP47+knGgQ/xnc3XY8xzkW587dlZzNqRA==
NODE_SHA512_arm64=IZx0J52/1NDwAsY2iyWR9nlPIYuYviTWetjj8+ElvYQh2+XRhLfCfkbFEF/2O5vGI2hcUbyPNHV+nz342FbJXw==

say() { echo "[ensure-tools] $*" >&2; }

[ $# -gt 0 ] || set -- node temporal stripe-mock toxiproxy-server postgres chromium

# One run at a time per cache: parallel callers (test setups, a second checkout) wait for the first
# build instead of compiling the same tool again beside it. Node alone takes a lock of its own (below):
# `scripts/use-node.sh` must not wait half an hour behind a Go build.
mkdir -p "$TOOLS_DIR"
if [ "$*" != node ]; then
  exec 9>"$TOOLS_DIR/.ensure-tools.lock"
  flock 9
fi

find_go() {
  if command -v go >/dev/null 2>&1; then command -v go
  elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go
  else return 1; fi
}

# Builds into TOOLS_DIR with the Go module proxy. $1 = the binary's name there, $2 = module@version
# (its command directory's name may differ: toxiproxy's is `server`).
go_build() {
  local go
  go=$(find_go) || return 1
  mkdir -p "$TOOLS_DIR"
  say "building $1 from $2 with $($go version | cut -d' ' -f3) into $TOOLS_DIR (the first build takes minutes)..."
  local start=$SECONDS
  # Built beside the cache and moved in whole, so no caller ever sees a half-written binary.
  local out
  out=$(mktemp -d "$TOOLS_DIR/.build.XXXXXX")
  GOBIN="$out" "$go" install -ldflags="-s -w" "$2" >&2 || { rm -rf "$out"; return 1; }
  mv "$out/$(basename "${2%%@*}")" "$TOOLS_DIR/$1"
  rm -rf "$out"
  say "built $1 in $((SECONDS - start))s ($(du -h "$TOOLS_DIR/$1" | cut -f1))"
}

# Without Go: the official release archive, when the internet is reachable.
download_temporal() {
  command -v curl >/dev/null 2>&1 || return 1
  local arch
  case "$(uname -m)" in x86_64) arch=amd64 ;; aarch64|arm64) arch=arm64 ;; *) return 1 ;; esac
  say "no Go toolchain; downloading the temporal CLI release..."
  mkdir -p "$TOOLS_DIR"
  curl -fsSL --max-time 300 "https://temporal.download/cli/archive/latest?platform=linux&arch=$arch" \
    | tar -xz -C "$TOOLS_DIR" temporal
}

# The newest PostgreSQL server binaries on this machine: PG_BIN, or Debian's /usr/lib/postgresql/N/bin.
find_postgres() {
  if [ -n "${PG_BIN:-}" ]; then echo "$PG_BIN"; return; fi
  local dir
  dir=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)
  [ -n "$dir" ] && [ -x "$dir/initdb" ] && echo "$dir"
}

# Installs a Debian package as root, or says how to. $1 = package, $2 = what it is, $3 = the alternative.
apt_install() {
  if [ "$(id -u)" != 0 ]; then
    say "$2 is not installed: run \`sudo apt-get install -y $1\` (or $3)."
    exit 1
  fi
  say "installing $2 from Debian's packages..."
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$1") >&2 \
    || { say "could not install $2 with apt-get"; exit 1; }
}

ensure_postgres() {
  local dir
  if ! dir=$(find_postgres); then
    apt_install postgresql "PostgreSQL's server" "set PG_BIN to the directory holding initdb and pg_ctl"
    dir=$(find_postgres) || { say "PostgreSQL was installed but no initdb was found under /usr/lib/postgresql"; exit 1; }
  fi
  echo "postgres=$dir"
}

# The browser playwright-core drives: CHROMIUM_BIN, or Debian's chromium (never a downloaded one).
ensure_chromium() {
  local path=${CHROMIUM_BIN:-}
  [ -n "$path" ] || path=$(command -v chromium || true)
  if [ -z "$path" ]; then
    apt_install chromium Chromium "set CHROMIUM_BIN"
    path=$(command -v chromium) || { say "Chromium was installed but is not on PATH"; exit 1; }
  fi
  echo "chromium=$path"
}

# Whether the node at $1 is NODE_MIN or later.
node_supported() {
  "$1" -e "const [a, b] = process.versions.node.split('.').map(Number), [x, y] = '$NODE_MIN'.split('.').map(Number);
           process.exit(a > x || (a === x && b >= y) ? 0 : 1)" 2>/dev/null
}

# The npm registry's node-linux-<arch> package: bin/node and include/node (the headers native builds
# need), no npm; the machine's npm runs under it. The tarball must be the one pinned above (NODE_SHA512_<arch>).
install_node() {
  local dir=$1 arch out
  case "$(uname -m)" in x86_64) arch=x64 ;; aarch64|arm64) arch=arm64 ;; *) say "no Node package for $(uname -m)"; exit 1 ;; esac
  command -v npm >/dev/null 2>&1 \
    || { say "no npm to fetch Node $NODE_VERSION with: install Node $NODE_MIN or later (https://nodejs.org)"; exit 1; }
  say "Node on PATH is $(node -v 2>/dev/null || echo missing), older than $NODE_MIN: fetching node-linux-$arch@$NODE_VERSION..."
  out=$(mktemp -d "$TOOLS_DIR/.build.XXXXXX")
  local pinned="NODE_SHA512_$arch" got
  if ! (cd "$out" && npm pack --silent "node-linux-$arch@$NODE_VERSION" >/dev/null) >&2; then
    rm -rf "$out"
    say "could not fetch node-linux-$arch@$NODE_VERSION: install Node $NODE_MIN or later and put it on PATH."
    exit 1
  fi
  got=$(openssl dgst -sha512 -binary "$out"/node-linux-*.tgz | base64 -w0)
  if [ "$got" != "${!pinned}" ]; then
    rm -rf "$out"
    say "node-linux-$arch@$NODE_VERSION is not the tarball this script pins (sha512-$got): refused."
    exit 1
  fi
  if ! tar -xzf "$out"/node-linux-*.tgz -C "$out" >&2 || ! node_supported "$out/package/bin/node"; then
    rm -rf "$out"
    say "could not install node-linux-$arch@$NODE_VERSION: install Node $NODE_MIN or later and put it on PATH."
    exit 1
  fi
  rm -rf "$dir"   # a partial copy left by hand; the lock keeps other callers out
  mv "$out/package" "$dir"
  rm -rf "$out"
  say "installed Node $NODE_VERSION in $dir"
}

ensure_node() {
  local dir="$TOOLS_DIR/node-$NODE_VERSION"
  if command -v node >/dev/null 2>&1 && node_supported node; then
    echo "node=$(dirname "$(command -v node)")"
    return
  fi
  if [ ! -x "$dir/bin/node" ]; then
    exec 8>"$TOOLS_DIR/.node.lock"
    flock 8
    [ -x "$dir/bin/node" ] || install_node "$dir"
  fi
  echo "node=$dir/bin"
}

ensure() {
  local name=$1 path=""
  if [ "$name" = node ]; then ensure_node; return; fi
  if [ "$name" = postgres ]; then ensure_postgres; return; fi
  if [ "$name" = chromium ]; then ensure_chromium; return; fi
  if [ "$name" = temporal ] && [ -n "${TEMPORAL_CLI:-}" ]; then path=$TEMPORAL_CLI
  elif [ "$name" = stripe-mock ] && [ -n "${STRIPE_MOCK_BIN:-}" ]; then path=$STRIPE_MOCK_BIN
  elif [ "$name" = toxiproxy-server ] && [ -n "${TOXIPROXY_BIN:-}" ]; then path=$TOXIPROXY_BIN
  elif command -v "$name" >/dev/null 2>&1; then path=$(command -v "$name")
  elif [ -x "$TOOLS_DIR/$name" ]; then path="$TOOLS_DIR/$name"
  fi
  if [ -z "$path" ]; then
    case "$name" in
      temporal)
        go_build temporal "github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION" \
          || download_temporal \
          || { say "could not get the temporal CLI. Either install Go (https://go.dev/dl) so this script can run"
               say "  go install github.com/temporalio/cli/cmd/temporal@$TEMPORAL_CLI_VERSION"
               say "or install the CLI from https://docs.temporal.io/cli and put it on PATH (or set TEMPORAL_CLI)."
               exit 1; } ;;
      stripe-mock)
        go_build stripe-mock "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION" \
          || { say "could not build stripe-mock: install Go, or put stripe-mock on PATH (or set STRIPE_MOCK_BIN)."; exit 1; } ;;
      toxiproxy-server)
        go_build toxiproxy-server "github.com/Shopify/toxiproxy/v2/cmd/server@$TOXIPROXY_VERSION" \
          || { say "could not build toxiproxy-server: install Go, or put toxiproxy-server on PATH (or set TOXIPROXY_BIN)."; exit 1; } ;;
      *) say "unknown tool: $name"; exit 2 ;;
    esac
    path="$TOOLS_DIR/$name"
  fi
  [ -x "$path" ] || { say "$name at $path is not executable"; exit 1; }
  echo "$name=$path"
}

for tool in "$@"; do ensure "$tool"; done
