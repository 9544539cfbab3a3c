#!/usr/bin/env bash
# Prove that the offline bundle installs with no network (`make bundle-check`; not part of
# `make test`: the first build downloads about a GB). Builds the bundle, installs it into a
# fresh venv inside a network namespace that has no network, then, still offline, imports
# the server, checks that the embedded model is there and answers, and prints the figures.
# Needs `unshare`: as root, or with unprivileged user namespaces.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

if [ "$(id -u)" = 0 ]; then offline=(unshare --net); else offline=(unshare --map-root-user --net); fi
now() { date +%s.%N; }
seconds_since() { awk -v start="$1" -v end="$(now)" 'BEGIN { printf "%.0f", end - start }'; }

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
archive=${DIST:-dist}/python-data-agent-bundle-$version.tar
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

start=$(now)
scripts/bundle.sh
build_s=$(seconds_since "$start")

start=$(now)
"${offline[@]}" env VENV="$work/venv" VENDOR="$work/vendor" scripts/install_offline.sh "$archive"
install_s=$(seconds_since "$start")

echo "bundle-check: offline, in a fresh venv: pip check, the UI's libraries, the server, the model"
"${offline[@]}" "$work/venv/bin/python" -m pip check
diff -r frontend/assets/vendor "$work/vendor"
(cd "$work" && "${offline[@]}" env PYTHONPATH="$repo" venv/bin/python - <<'EOF'
import errno
import socket

try:
    socket.create_connection(("192.0.2.1", 443), timeout=5).close()
    raise SystemExit("bundle-check: this namespace has a network")
except OSError as error:
    assert error.errno == errno.ENETUNREACH, error

import backend.main  # noqa: F401  (the whole server imports)
from backend.llm.embedded import shipped_model_path
from llama_cpp import Llama

model = shipped_model_path()
print(f"bundle-check: embedded model {model.name}, {model.stat().st_size / 1e6:.0f} MB")
llm = Llama(model_path=str(model), n_ctx=256, verbose=False)
reply = llm.create_completion("The capital of France is", max_tokens=8, temperature=0)
print(f"bundle-check: it answers: {reply['choices'][0]['text']!r}")
EOF
)

echo "bundle-check: passed"
echo "  bundle:  $archive, $(du -h "$archive" | cut -f1) ($(stat -c %s "$archive") bytes)"
echo "  build:   ${build_s} s"
echo "  install: ${install_s} s (offline, into a fresh venv of $(du -sh "$work/venv" | cut -f1))"
