# `make run` starts the server and UI; `make test` runs lint, types and the suite.
# Both create .venv and install whatever is missing, including Debian packages as root.
# `make run` installs the runtime lock (requirements.txt) only; `make test` the dev lock
# (requirements-dev.txt: runtime, Ray and the test tools). `make lock` regenerates the
# locks from pyproject.toml, the one place where direct requirements are pinned.

SHELL := /bin/bash
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
# The optional open-interpreter worker lives in its own venv: its pins clash with FastAPI's.
OI_VENV := .venv-openinterpreter
OI_PY := $(OI_VENV)/bin/python
DEBIAN_PACKAGES := bubblewrap nodejs
# The UI's browser libraries, pinned by frontend/package-lock.json, copied where the app serves them.
VENDOR := frontend/assets/vendor
# MCP clients the tests drive against /mcp (the MCP Inspector's CLI), pinned by their lock.
MCP_CLIENTS := tests/mcp_clients
# The official OpenAI Node SDK, which the tests drive against /v1, pinned by its lock.
OPENAI_NODE := tests/openai_node
# A real OpenID provider for the single sign-on tests (the certified oidc-provider package,
# tests/oidc_provider/provider.mjs), pinned by its lock.
OIDC_PROVIDER := tests/oidc_provider
# Third-party MCP servers the tests connect our agents to, each in a venv of its own under
# MCP_SERVERS_VENV, pinned by tests/mcp_servers/<name>/requirements.txt: their `mcp` pins clash
# with ours and with each other (mcp-server-time needs mcp 2.3+, mcp-server-sqlite runs on 1.x).
MCP_SERVERS_VENV := .venv-mcp-servers
MCP_SERVERS := time sqlite

# llama.cpp is compiled for a portable x86-64-v3 baseline: a native build enables
# AVX-512/AMX kernels that crash in VMs that do not grant AMX, and a cached native
# wheel breaks on another CPU. pip's wheel cache keeps the build after the first time.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
	-DGGML_F16C=ON -DGGML_AVX512=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF

.PHONY: run test install install-dev system-deps lint typecheck openinterpreter frontend mcp-clients \
	mcp-servers openai-node oidc-provider lock bundle install-offline bundle-check \
	container-check

# The API serves the UI too; run_frontend.py is there for a UI on a port of its own.
run: install system-deps frontend
	$(PY) run_backend.py

# The UI tests drive Debian's Chromium (never a browser download); the storage tests
# start Debian's PostgreSQL server on a loopback port, and the data source tests MariaDB's
# too. The suite runs in TEST_WORKERS processes (pytest-xdist), each taking whole modules,
# so a module's fixtures stay shared: most tests wait on servers and sandboxes rather than
# use a core.
TEST_WORKERS ?= 2
test: DEBIAN_PACKAGES += chromium postgresql mariadb-server iproute2 prometheus
test: install-dev system-deps frontend openinterpreter mcp-clients mcp-servers openai-node \
	oidc-provider lint typecheck
	$(VENV)/bin/pytest -n $(TEST_WORKERS) --dist loadfile --durations=25

lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(PY) scripts/check_private_imports.py

typecheck: install-dev
	$(VENV)/bin/mypy

install: $(VENV)/.installed-runtime
install-dev: $(VENV)/.installed-dev
openinterpreter: $(OI_VENV)/.installed
frontend: $(VENDOR)/.installed
mcp-clients: $(MCP_CLIENTS)/node_modules/.installed
mcp-servers: $(MCP_SERVERS:%=$(MCP_SERVERS_VENV)/%/.installed)
openai-node: $(OPENAI_NODE)/node_modules/.installed
oidc-provider: $(OIDC_PROVIDER)/node_modules/.installed

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

# Hash-checking mode: every package must be in the lock and match one of its hashes.
# llama-cpp-python's sdist is checked against its hash, then built (or taken from
# pip's wheel cache, which records the sdist's hash); pip does not hash-check the
# build's own tools (scikit-build-core, cmake), which it installs in an isolated env.
$(VENV)/.installed-runtime: requirements.txt | $(PY)
	$(PY) -m pip install --require-hashes -r requirements.txt
	touch $@

# The dev lock is a superset of the runtime lock at the same versions (see lock).
$(VENV)/.installed-dev: requirements-dev.txt | $(PY)
	$(PY) -m pip install --require-hashes -r requirements-dev.txt
	touch $@ $(VENV)/.installed-runtime

# The locks pin every transitive package with its hashes, resolved for CPython 3.11 on
# x86-64 Linux. The dev lock is resolved first; the others are constrained by it, so each
# package has one version in all three and `make run` after `make test` installs nothing.
# uv keeps the pins already in a lock; `make lock LOCK_ARGS=--upgrade` (or
# `--upgrade-package NAME`) moves them. uv only generates the locks, from a throwaway
# venv: it is never a requirement of the project. Each MCP server's lock is resolved on its
# own, from tests/mcp_servers/<name>/requirements.in, with extras kept (`mcp[cli]==…`): pip's
# hash-checking mode refuses a dependency on `mcp[cli]` that the lock pins as plain `mcp`.
UV_VERSION := 0.13.9
LOCK_TOOLS := $(or $(TMPDIR),/tmp)/python-data-agent-uv-$(UV_VERSION)
UV := $(LOCK_TOOLS)/bin/uv
LOCK_FLAGS := --generate-hashes --python-version 3.11 --python-platform linux \
	--annotation-style line --no-header --quiet $(LOCK_ARGS)
LOCK_COMPILE := $(UV) pip compile pyproject.toml $(LOCK_FLAGS)
lock: | $(UV)
	$(LOCK_COMPILE) --extra dev -o requirements-dev.txt
	$(LOCK_COMPILE) --extra ray -c requirements-dev.txt -o requirements-ray.txt
	$(LOCK_COMPILE) -c requirements-dev.txt -o requirements.txt
	for lock in requirements.txt requirements-ray.txt requirements-dev.txt; do \
	  { printf '%s\n' '# Lock file: every package of one install set, pinned with its sha256 hashes;' \
	    '# generated from pyproject.toml by `make lock` (uv pip compile). To change it, edit' \
	    '# pyproject.toml and run `make lock`; never edit this file by hand.'; \
	    cat $$lock; } > $$lock.new && mv $$lock.new $$lock; \
	done
	for server in $(MCP_SERVERS); do \
	  lock=tests/mcp_servers/$$server/requirements.txt; \
	  $(UV) pip compile tests/mcp_servers/$$server/requirements.in $(LOCK_FLAGS) --no-strip-extras \
	    -o $$lock || exit 1; \
	  { printf '%s\n' '# Lock file: every package of one install set, pinned with its sha256 hashes;' \
	    '# generated from requirements.in by `make lock` (uv pip compile). To change it, edit' \
	    '# requirements.in and run `make lock`; never edit this file by hand.'; \
	    cat $$lock; } > $$lock.new && mv $$lock.new $$lock; \
	done

$(UV):
	$(PYTHON) -m venv $(LOCK_TOOLS)
	$(LOCK_TOOLS)/bin/pip install --quiet uv==$(UV_VERSION)

$(OI_PY):
	$(PYTHON) -m venv $(OI_VENV)
	$(OI_PY) -m pip install --quiet --upgrade pip

$(OI_VENV)/.installed: requirements-openinterpreter.txt | $(OI_PY)
	$(OI_PY) -m pip install -r requirements-openinterpreter.txt
	touch $@

# One venv per MCP server, hash-checked like .venv; reinstalled whenever its lock changes.
$(MCP_SERVERS_VENV)/%/.installed: tests/mcp_servers/%/requirements.txt
	[ -x $(@D)/bin/python ] || { $(PYTHON) -m venv $(@D) \
	  && $(@D)/bin/python -m pip install --quiet --upgrade pip; }
	$(@D)/bin/python -m pip install --require-hashes -r $<
	touch $@

$(VENDOR)/.installed: frontend/package.json frontend/package-lock.json frontend/vendor-charts.mjs | system-deps
	cd frontend && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	rm -rf $(VENDOR) && mkdir -p $(VENDOR)/katex
	cp frontend/node_modules/markdown-it/dist/browser/markdown-it.esm.min.mjs $(VENDOR)/markdown-it.mjs
	cp frontend/node_modules/dompurify/dist/purify.es.mjs $(VENDOR)/purify.mjs
	cp frontend/node_modules/tus-js-client/dist/tus.min.js $(VENDOR)/tus.min.js
	cp frontend/node_modules/@highlightjs/cdn-assets/es/highlight.min.js $(VENDOR)/highlight.mjs
	cp frontend/node_modules/@highlightjs/cdn-assets/styles/github.min.css $(VENDOR)/highlight-light.css
	cp frontend/node_modules/@highlightjs/cdn-assets/styles/github-dark.min.css $(VENDOR)/highlight-dark.css
	cp -r frontend/node_modules/katex/dist/katex.mjs frontend/node_modules/katex/dist/katex.min.css \
		frontend/node_modules/katex/dist/fonts $(VENDOR)/katex/
	# Charts, loaded by chart-frame.js only when a chart appears: builds that run under the CSP.
	cp frontend/node_modules/plotly.js-cartesian-dist-min/plotly-cartesian.min.js $(VENDOR)/
	cp frontend/node_modules/vega/build/vega.min.js frontend/node_modules/vega-lite/build/vega-lite.min.js \
		frontend/node_modules/vega-embed/build/vega-embed.min.js $(VENDOR)/
	cd frontend && node vendor-charts.mjs assets/vendor  # Plotly's style sheets and traces, vega-interpreter.js
	touch $@

$(MCP_CLIENTS)/node_modules/.installed: $(MCP_CLIENTS)/package.json $(MCP_CLIENTS)/package-lock.json | system-deps
	cd $(MCP_CLIENTS) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

$(OPENAI_NODE)/node_modules/.installed: $(OPENAI_NODE)/package.json $(OPENAI_NODE)/package-lock.json | system-deps
	cd $(OPENAI_NODE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

$(OIDC_PROVIDER)/node_modules/.installed: $(OIDC_PROVIDER)/package.json $(OIDC_PROVIDER)/package-lock.json | system-deps
	cd $(OIDC_PROVIDER) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

system-deps:
	@missing=""; for pkg in $(DEBIAN_PACKAGES); do \
	  dpkg -s $$pkg >/dev/null 2>&1 || missing="$$missing $$pkg"; done; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ]; then \
	    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $$missing; \
	  else \
	    echo "warning: missing Debian packages:$$missing; run: sudo apt-get install -y$$missing" >&2; \
	  fi; \
	fi

# The offline bundle (docs/deployment.md#offline-install): `make bundle` writes
# dist/python-data-agent-bundle-VERSION.tar; `make install-offline BUNDLE=…` installs from it
# with no registry; `make bundle-check` proves that in a network namespace with no network
# (it downloads about 440 MB and may compile llama.cpp, so it is not part of `make test`).
bundle: install frontend
	PY=$(PY) BUNDLE_DEBIAN_PACKAGES=bubblewrap scripts/bundle.sh

install-offline:
	PYTHON=$(PYTHON) VENV=$(VENV) VENDOR=$(VENDOR) scripts/install_offline.sh $(BUNDLE)

bundle-check: install frontend
	PY=$(PY) BUNDLE_DEBIAN_PACKAGES=bubblewrap scripts/bundle_check.sh

# The container image (docs/deployment.md#container-image), built on a Debian base made here
# with mmdebstrap and tried with podman: health, sign-in, a sandboxed run, a restart that
# keeps the data. As root; the first build compiles llama.cpp. Not part of `make test`.
container-check:
	bash scripts/container_check.sh
