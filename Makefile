# ArkGPU developer entry points. Every target creates .venv when missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)

.PHONY: demo test lint typecheck contracts unit sanitize bench native clean

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e '.[test]'
	rm -f $(VENV)/.installed-*
	touch $@

native: $(STAMP)
	$(MAKE) -C src/arkgpu/limiter/native

demo: $(STAMP) native
	$(BIN)/arkgpu demo

lint: $(STAMP)
	$(BIN)/ruff check src tests
	$(BIN)/ruff format --check src tests

typecheck: $(STAMP)
	$(BIN)/mypy

contracts: $(STAMP)
	$(BIN)/lint-imports

unit: $(STAMP) native
	$(BIN)/pytest -q -p no:cacheprovider

# limiter (issue 22): the limiter tests again against the ASan+UBSan build
# (native/build-asan; TSan: `make -C src/arkgpu/limiter/native tsan`, docs/LIMITER.md)
sanitize: $(STAMP) native
	$(MAKE) -C src/arkgpu/limiter/native asan
	ARKGPU_LIMITER_BUILD=asan $(BIN)/pytest -q -p no:cacheprovider tests/limiter

test: lint typecheck contracts unit sanitize

bench: $(STAMP) native
	$(BIN)/arkgpu placement bench --trace default --policies random,dotprod,clustering,packing,bestfit,fgd,arkgpu --seeds 42-51 --json bench-placement.json --plot bench-placement.png

clean:
	rm -rf $(VENV) build dist .mypy_cache .ruff_cache
	$(MAKE) -C src/arkgpu/limiter/native clean
