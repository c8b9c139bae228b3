# `make test` sets everything up on a fresh Debian machine, then lints and tests.
# `make demo` runs the lab: fake kube-apiservers behind real LBs, measured by the daemon.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SYSDEPS := $(VENV)/.system-deps
PYTEST_ARGS ?=

.PHONY: test test-loaded test-matrix test-repeat lab-repeat lint unit fuzz setup upstream demo bench golden clean

test: setup lint unit

setup: $(STAMP) $(SYSDEPS)

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(SYSDEPS): scripts/system-deps.sh
	@mkdir -p $(VENV)
	scripts/system-deps.sh
	touch $@

# Static checks only: style, format, strict types of all of prober, the layer contracts; the
# Go of upstream/ formatted and vetted.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy --strict prober
	$(BIN)/lint-imports
	@unformatted=$$(cd upstream && gofmt -l .); [ -z "$$unformatted" ] || \
		{ echo "gofmt: $$unformatted"; exit 1; }
	cd upstream && GOTOOLCHAIN=local go vet ./...

unit: setup upstream
	$(BIN)/pytest $(PYTEST_ARGS)

# Upstream's own kube-apiserver v1.37.2 (with OpenShift's shutdown header, by a main of
# ours), etcd 3.7 and a client-go informer, built from the Go module proxy into
# upstream/bin (upstream/build.sh; GOTOOLCHAIN=local). A cold build takes about 12 minutes
# on 2 cores, a warm one a few seconds. `make demo` never builds Go; `make test` does, for
# the smoke test of the real apiserver (tests/lab/upstream).
upstream:
	upstream/build.sh
	cd upstream && GOTOOLCHAIN=local go test ./...

# Properties with fresh random examples (`make test` draws from a fixed seed), FUZZ_RUNS times.
FUZZ_RUNS ?= 5
fuzz: setup
	@for i in $$(seq $(FUZZ_RUNS)); do HYPOTHESIS_PROFILE=explore $(BIN)/pytest -q $(PYTEST_ARGS) \
		$$(grep -rl "from hypothesis" tests --include="test_*.py") || exit 1; done

# `make test` holds each lab run once, on an unloaded machine, in under 10 minutes: tests/lab
# (a rollout on aws's and gcp's kernel path, gcp's with a control daemon, and metal's
# HAProxy; slow-lb, crash, node-loss, eviction, kubelet, watch clients on aws, the kernel
# LB's error classes) and tests/reliability (the fault matrix, lab faults, stops at seeded
# moments, a 24-second soak). Tests marked `matrix` are left out of it: the rollouts on azure
# and none, the upgrade, two labs side by side, the watch grace comparison, watch clients on
# metal with a 25 s watch grace, the one-minute soak, the rebalancing play. `make test-matrix` runs
# those; `make test-repeat` runs both sets REPEAT times each, under two CPU burners, and
# prints each test's failures over the repeats: a suite that is never flaky prints none. It
# takes REPEAT times as long as those tests do, so it is not part of `make test`.
# TESTS='tests/reliability/test_soak.py' narrows it.
REPEAT ?= 5
TESTS ?= tests/reliability tests/lab
test-matrix: setup
	$(BIN)/pytest $(PYTEST_ARGS) -m matrix tests/lab tests/reliability

test-repeat: setup
	scripts/repeat-tests.sh $(REPEAT) $(BIN)/pytest $(PYTEST_ARGS) -m 'matrix or not matrix' $(TESTS)

# The lab's own check, proven not to flake: `prober lab --check` LAB_REPEAT times for each
# platform/scenario of LAB_CASES, beside two CPU burners, printing each run's verdict line and
# its CHECK lines; a failed run's folder is kept for reading. About 40 s a run at 0.05.
LAB_REPEAT ?= 5
LAB_CASES ?= aws/rollout gcp/rollout metal/rollout aws/node-loss gcp/node-loss
LAB_ARGS ?= --time-scale 0.05
lab-repeat: setup
	scripts/repeat-lab.sh $(LAB_REPEAT) $(BIN)/prober '$(LAB_CASES)' $(LAB_ARGS)

# Right under load: the lab tests and the fault matrix with two CPU-burning processes beside
# them, as on a busy CI node during a rollout (the target starts and stops them itself).
test-loaded: setup
	scripts/with-cpu-burners.sh 2 $(BIN)/pytest $(PYTEST_ARGS) tests/lab tests/reliability

# The whole job on this machine: fake apiservers behind real LBs, a rolling restart, the
# daemon measuring it, the measurement against the truth. DEMO_ARGS='--platform gcp --check'.
demo: setup
	$(BIN)/prober lab $(DEMO_ARGS)

# When a change alters an output on purpose: write tests/golden/expected anew from the
# committed event log, the README's picture docs/rollout.svg from it and the module index
# docs/modules.md from the code; then review
# `git diff tests/golden docs` (tests/golden/outputs.py, tests/docs/picture.py).
golden: setup
	$(BIN)/python -m tests.golden.outputs --update
	$(BIN)/python -m tests.docs.picture --update
	$(BIN)/python -m tests.docs.modules --update

bench: setup
	@for b in bench/[!_]*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis upstream/bin
