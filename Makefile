# ArkGPU developer entry points. Every target creates .venv when missing.
# `make demo` installs the package with what the demo needs ([plots]: the core
# and matplotlib); `make test` adds the benchmarks' extras and the test toolchain
# ([test]).
# Both are editable installs: the package build (setup.py) also builds the
# limiter's native parts in src/arkgpu/limiter/native/build; `make native`
# rebuilds them after a change to the C sources.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SUM := $(shell cat pyproject.toml setup.py | cksum | cut -d' ' -f1)
DEMO_STAMP := $(VENV)/.demo-$(SUM)
TEST_STAMP := $(VENV)/.test-$(SUM)

.PHONY: demo test lint typecheck contracts unit sanitize bench native browser control-plane node wheel image cuda-image clean

# Installs into .venv with the extras given in $(1).
define install
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[$(1)]'
endef

$(DEMO_STAMP): pyproject.toml setup.py
	$(call install,plots)
	rm -f $(VENV)/.demo-*
	touch $@

# The test extras include the demo's, so a test install serves the demo too.
$(TEST_STAMP): pyproject.toml setup.py
	$(call install,test)
	rm -f $(VENV)/.test-* $(VENV)/.demo-*
	touch $@ $(DEMO_STAMP)

native:
	$(MAKE) -C src/arkgpu/limiter/native

demo: $(DEMO_STAMP) native
	$(BIN)/arkgpu demo

lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests setup.py scripts/imagebuild
	$(BIN)/ruff format --check src tests setup.py scripts/imagebuild

# The package, the image builder (scripts/imagebuild, not part of the package) and the
# tests, in one run (pyproject.toml [tool.mypy] lists them).
typecheck: $(TEST_STAMP)
	$(BIN)/mypy

contracts: $(TEST_STAMP)
	$(BIN)/lint-imports

# The report's browser test needs Debian's chromium; installed with apt when missing.
browser:
	bash scripts/ensure-chromium.sh

# The end-to-end tests' control plane (etcd, kube-apiserver, kube-scheduler 1.37.2),
# built once per machine from the Go module proxy into ~/.cache/arkgpu (about
# 7 min on 2 cores the first time; a cache hit after that). ARKGPU_E2E=1 makes
# pytest collect tests/e2e.
control-plane:
	bash scripts/build-control-plane.sh

# The real node of tests/e2e/test_real_node*.py (kubelet, kube-controller-manager, kubectl,
# kube-proxy 1.37.2, CoreDNS 1.14, containerd 2.4, runc 1.5, the CNI plugins, the pause
# image; Debian's iptables), built once per
# machine from the Go module proxy into ~/.cache/arkgpu/node (docs/studies/real-node.md
# for the times; a cache hit after that). Its tests run as root.
node:
	bash scripts/build-node.sh

# helm v4.3.2 for the chart (deploy/helm/arkgpu) and its tests, built once per
# machine from the Go module proxy into ~/.cache/arkgpu/helm (about 5 min of CPU the
# first time: docs/studies/helm.md). The tests build it when they need it.
.PHONY: helm
helm:
	bash scripts/build-helm.sh

# Two lanes side by side (scripts/test-lanes.sh): the real-node tier in one pytest, the rest
# in another. helm is built here, before the lanes start, so that they never build it at once.
unit: $(TEST_STAMP) native browser control-plane node helm
	ARKGPU_E2E=1 bash scripts/test-lanes.sh $(BIN)/pytest -q -p no:cacheprovider

# The limiter tests again against the ASan+UBSan build (native/build-asan;
# ThreadSanitizer: `make -C src/arkgpu/limiter/native tsan`, docs/LIMITER.md).
sanitize: $(TEST_STAMP) native
	$(MAKE) -C src/arkgpu/limiter/native asan
	ARKGPU_LIMITER_BUILD=asan $(BIN)/pytest -q -p no:cacheprovider tests/limiter

test: lint typecheck contracts unit sanitize

bench: $(DEMO_STAMP) native
	$(BIN)/arkgpu placement bench --trace default --policies random,dotprod,clustering,packing,bestfit,fgd,arkgpu --seeds 42-51 --json bench-placement.json --plot bench-placement.png

# A wheel for this platform in dist/ (the native parts built from a clean copy).
wheel:
	$(PYTHON) -m pip wheel --no-deps -w dist .

# ArkGPU's container image (the chart's arkgpu/arkgpu:<version>) as an OCI archive,
# without a container daemon or registry: a Debian base from mmdebstrap (cached in
# ~/.cache/arkgpu/image), the wheel and its pinned dependencies (deploy/image/).
# Needs root. Prints the archive's path last; load it with
# `ctr -n k8s.io images import PATH` or `docker load -i PATH` (docs/IMAGE.md).
image:
	@command -v mmdebstrap >/dev/null || apt-get install -y -q mmdebstrap >&2
	$(PYTHON) scripts/imagebuild

# The tests' plain image of a user's CUDA program (deploy/image/cuda-program): the
# same Debian base and one small C program that opens the node's libcuda.so.1.
cuda-image:
	@command -v mmdebstrap >/dev/null || apt-get install -y -q mmdebstrap >&2
	$(PYTHON) scripts/imagebuild --cuda-program

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache src/arkgpu.egg-info
	$(MAKE) -C src/arkgpu/limiter/native clean
