# `make demo` and `make test` each build the virtual environment when it is missing.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test test-unit lint docs bench clean system-deps

$(BIN)/memstream: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $@

demo: $(BIN)/memstream
	$(BIN)/memstream demo

# Unit, projection and integration tests; the integration tests start the embedded broker
# (one per test process). Two processes, each module in one of them (its fixtures shared);
# most integration tests wait on a worker process more than they compute.
test: $(BIN)/memstream system-deps
	$(BIN)/python -m pytest -q -n 2 --dist loadfile

# What the tests drive besides Python: Debian's chromium (the inspector's browser test, no
# browser download) and tmux (the terminal chat's test). Installed with apt when missing.
system-deps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v tmux >/dev/null 2>&1 || missing="$$missing tmux"; \
	if [ -n "$$missing" ]; then \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo="sudo"; \
		echo "installing$$missing with apt"; \
		$$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $$missing; \
	fi

test-unit: $(BIN)/memstream
	$(BIN)/python -m pytest -q -m "not integration"

# mypy needs the installed package layout (memstream.models, ...) to follow imports between
# the three folders: a tree of links under build/ gives it that without installing again.
lint: $(BIN)/memstream
	mkdir -p build/typecheck/memstream
	for d in models streams projections; do ln -sfn "$(CURDIR)/$$d" build/typecheck/memstream/$$d; done
	MYPYPATH=build/typecheck $(BIN)/python -m mypy --namespace-packages --explicit-package-bases \
		-p memstream.models -p memstream.streams -p memstream.projections
	$(BIN)/python -m ruff check models streams projections tests benchmarks

# The documentation site, from docs/ and mkdocs.yml, into site/ (open site/index.html).
docs: $(BIN)/memstream
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --site-dir site

clean:
	rm -rf $(VENV) .memstream build site *.egg-info
