# One-command set-up: `make demo` and `make test` each create the virtualenv and install what
# they need. torch==2.13.0 (CPU build) is installed before anything that depends on torch.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kgmem-installed
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export LANGSMITH_TRACING ?= false
export TOKENIZERS_PARALLELISM := false

.PHONY: install browser demo test test-fast bench bench-full clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[local,dev,bench]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

# headless Debian chromium for the HTML view test (tests/test_html_view.py skips without it)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null || echo "could not install chromium: the HTML view test will be skipped"; \
	  else echo "chromium is missing (install it with: sudo apt-get install chromium): the HTML view test will be skipped"; fi; }

test: $(STAMP) browser
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not integration"

bench: $(STAMP)
	$(PY) tools/bench.py --quick

bench-full: $(STAMP)
	$(PY) tools/bench.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info demo_output
