# Everything a newcomer needs. `make demo` runs the main job, `make test` the tests;
# both install what is missing first (virtualenv, pip packages; the harness itself
# installs Kafka, Flink, Prometheus and builds the Nexmark job when a run needs them).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RESULTS ?= results

.PHONY: setup test unit integration demo bench lint thesis-sim clean down k8s-build k8s-up k8s-down test-k8s test-calibrate

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

## The harness' bytecode, compiled once: a shell with PYTHONDONTWRITEBYTECODE set (some CI images and
## sandboxes) would otherwise compile every module from source at every `bench` start (issue 13).
setup: $(STAMP)
	@$(BIN)/python -m compileall -q harness autoscalers workloads

## Unit, CLI, simulator and integration tests (the integration tests start real services), in two
## lanes (tests/conftest.py): the real-stack tests one at a time, everything else beside them.
## The k8s test cluster's binaries and base image are prepared in the background meanwhile (once per
## machine, cached); its tests run last in their lane. The full benchmark runs on it are `make test-k8s`.
test: setup
	@mkdir -p .bench
	nice -n 19 $(BIN)/bench k8s prepare > .bench/k8s-prepare.log 2>&1 &
	$(BIN)/pytest -q -m "not k8s_e2e" -n 2 --durations=15

## bench calibrate end to end on the real stack alone (~3 minutes; also part of `make test`).
test-calibrate: setup
	$(BIN)/pytest -q -m calibration_e2e

## The k8s test cluster: binaries from the Go module proxy and images from Debian packages (cached).
k8s-build: setup
	$(BIN)/bench k8s build
	$(BIN)/bench k8s images

k8s-up: setup
	$(BIN)/bench k8s up

k8s-down: setup
	$(BIN)/bench k8s down

## Everything on the k8s test cluster: the API-server tier and the end-to-end benchmark runs.
test-k8s: setup
	$(BIN)/pytest -q -m k8s_cluster tests/k8s

unit: setup
	$(BIN)/pytest -q -m "not integration"

integration: setup
	$(BIN)/pytest -q -m integration

## A short real experiment on the local stack (Kafka + Flink + Prometheus), then a table and a plot.
demo: setup
	$(BIN)/bench run --scaler ds2 --query q1 --pattern cosine --duration 360 \
	    --set pattern.time_scale=20 --plot $(RESULTS)/demo.png

## The thesis' four experiments on the simulator.
thesis-sim: setup
	for f in experiments/thesis-*.yaml; do $(BIN)/bench matrix $$f --results $(RESULTS) || exit 1; done

bench: setup
	for f in benchmarks/bench_*.py; do echo "== $$f"; $(BIN)/python $$f || exit 1; done

lint: setup
	$(BIN)/ruff check harness autoscalers workloads tests benchmarks
	$(BIN)/mypy harness autoscalers workloads

down: setup
	$(BIN)/bench down

clean:
	rm -rf $(VENV) .bench queries/target
