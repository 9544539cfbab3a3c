#!/usr/bin/env bash
# Install the server from an offline bundle (`make install-offline BUNDLE=…`), with no
# package registry: pip runs with --no-index and no configuration, and finds only the
# bundle's wheels, each checked against a hash of the bundle's lock.
#
#   scripts/install_offline.sh path/to/python-data-agent-bundle-VERSION.tar
#
# Environment: PYTHON (creates the venv: python3.11, else python3), VENV (.venv),
# VENDOR (frontend/assets/vendor).
set -euo pipefail
cd "$(dirname "$0")/.."

bundle=${1:?usage: $0 path/to/python-data-agent-bundle-VERSION.tar}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
VENV=${VENV:-.venv}
VENDOR=${VENDOR:-frontend/assets/vendor}

fail() { echo "install-offline: $*" >&2; exit 1; }
bundle_info() { sed -n "s/^$1=//p" "$root/BUNDLE_INFO"; }

[ -f "$bundle" ] || fail "no bundle at $bundle"
unpacked=$(mktemp -d)
trap 'rm -rf "$unpacked"' EXIT
tar -xf "$bundle" -C "$unpacked" --no-same-owner
roots=("$unpacked"/*)
if [ ${#roots[@]} != 1 ] || [ ! -f "${roots[0]}/SHA256SUMS" ]; then fail "$bundle is not a bundle"; fi
root=${roots[0]}

echo "install-offline: checking $bundle against its manifest"
(cd "$root" && sha256sum --check --strict --quiet SHA256SUMS) || fail "a file does not match SHA256SUMS"
extra=$(cd "$root" && comm -13 <(cut -c67- SHA256SUMS | LC_ALL=C sort) \
  <(find . -type f ! -name SHA256SUMS -printf '%P\n' | LC_ALL=C sort))
[ -z "$extra" ] || fail "files missing from SHA256SUMS: $extra"
sha256sum --check --strict --quiet "$root/SOURCES.sha256" || fail "the bundle was built from" \
  "other versions of these files: use a checkout of commit $(bundle_info commit)"

python=$("$PYTHON" -c 'import sys, sysconfig
print(f"{sys.version_info[0]}.{sys.version_info[1]}", sysconfig.get_platform())')
[ "$python" = "$(bundle_info python) $(bundle_info platform)" ] \
  || fail "the bundle is for Python $(bundle_info python) on $(bundle_info platform); $PYTHON is $python"

# Debian packages: only those not installed, in one dpkg call so that it orders them.
debs=("$root"/debs/*.deb)
if [ -e "${debs[0]}" ] && command -v dpkg >/dev/null; then
  missing=()
  for deb in "${debs[@]}"; do
    package=$(dpkg-deb --field "$deb" Package)
    dpkg-query --show --showformat='${Status}' "$package" 2>/dev/null | grep -q 'install ok installed' \
      || missing+=("$deb")
  done
  here="$(sed -n 's/^VERSION_CODENAME=//p' /etc/os-release | tr -d '"') $(dpkg --print-architecture)"
  if [ ${#missing[@]} = 0 ]; then
    :
  elif [ "$here" != "$(bundle_info debian)" ]; then
    echo "install-offline: warning: the bundle's Debian packages are for $(bundle_info debian), this is" \
      "$here: install $(bundle_info debian_packages) yourself" >&2
  elif [ "$(id -u)" = 0 ]; then
    echo "install-offline: Debian packages:" "${missing[@]##*/}"
    dpkg --install "${missing[@]}"
  else
    echo "install-offline: warning: Debian packages missing:" "${missing[@]##*/}" \
      "(run this again as root to install them from the bundle)" >&2
  fi
fi

# No pip configuration or PIP_* variable may add an index or a folder of files.
unset "${!PIP_@}"
export PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1
[ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
pip=("$VENV/bin/python" -m pip install --quiet --no-index --no-cache-dir --only-binary=:all:)
"${pip[@]}" --find-links "$root/pip" --require-hashes -r "$root/requirements-pip.txt"
wheels=("$root"/wheels/*.whl)
echo "install-offline: installing ${#wheels[@]} wheels into $VENV"
"${pip[@]}" --find-links "$root/wheels" --require-hashes -r "$root/requirements-bundle.txt"
touch "$VENV/.installed-runtime"

rm -rf "$VENDOR"
mkdir -p "$(dirname "$VENDOR")"
cp -R "$root/vendor" "$VENDOR"
touch "$VENDOR/.installed"
echo "install-offline: installed $(bundle_info version); start it with: $VENV/bin/python run_backend.py"
