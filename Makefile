# Everything a newcomer needs. `make demo` runs the main job, `make test` the tests;
# both install what is missing first (virtualenv, pip packages; the harness itself
# installs Kafka, Flink, Prometheus and builds the Nexmark job when a run needs them).

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
RESULTS ?= results

.PHONY: setup test unit integration demo bench lint thesis-sim clean down

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

## Unit, CLI, simulator and integration tests (the integration tests start real services).
test: setup
	$(BIN)/pytest -q

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
