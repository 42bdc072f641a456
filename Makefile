# `make demo` and `make test` each build the virtual environment when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-unit lint bench clean

$(BIN)/memstream: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(BIN)/memstream
	$(BIN)/memstream demo

# Unit, projection and integration tests; the integration tests start the embedded broker.
test: $(BIN)/memstream
	$(BIN)/python -m pytest -q

test-unit: $(BIN)/memstream
	$(BIN)/python -m pytest -q -m "not integration"

lint: $(BIN)/memstream
	$(BIN)/python -m mypy models streams projections
	$(BIN)/python -m ruff check models streams projections tests

clean:
	rm -rf $(VENV) .memstream build *.egg-info
