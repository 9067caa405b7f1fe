# One-command set-up: `make demo` and `make test` each create the virtualenv and install what
# they need. torch==2.13.0 (CPU build) is installed before anything that depends on torch.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.kgmem-installed
LLM_STAMP := $(VENV)/.kgmem-localmodel-installed
# llama.cpp built for a portable x86-64 CPU: a native build compiles instructions a virtual CPU may
# advertise but refuse ("Illegal instruction" at the first request); no multimodal library, no tools
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DLLAVA_BUILD=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export ANONYMIZED_TELEMETRY := False
export LANGSMITH_TRACING ?= false
export TOKENIZERS_PARALLELISM := false

.PHONY: install localmodel browser demo test test-fast docs bench bench-full clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[local,dev,bench,docs]'
	touch $(STAMP)

# the real-model tests' server: llama-cpp-python compiled from source (about ten minutes on two
# cores), once per machine: the wheel is kept in a wheelhouse that later installs reuse
WHEELHOUSE ?= $(HOME)/.cache/kgmem-wheelhouse
$(LLM_STAMP): $(STAMP)
	mkdir -p $(WHEELHOUSE)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc) $(PY) -m pip wheel --quiet \
	  --disable-pip-version-check --no-deps --find-links $(WHEELHOUSE) -w $(WHEELHOUSE) llama-cpp-python==0.3.36
	$(PY) -m pip install --quiet --disable-pip-version-check --find-links $(WHEELHOUSE) -e '.[localmodel]'
	touch $(LLM_STAMP)

install: $(STAMP)

localmodel: $(LLM_STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

# headless Debian chromium for the HTML view test (tests/test_html_view.py skips without it)
browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -qq && apt-get install -y -qq chromium >/dev/null || echo "could not install chromium: the HTML view test will be skipped"; \
	  else echo "chromium is missing (install it with: sudo apt-get install chromium): the HTML view test will be skipped"; fi; }

test: $(STAMP) $(LLM_STAMP) browser
	$(PY) -m pytest -q

test-fast: $(STAMP)
	$(PY) -m pytest -q -m "not integration"

# the documentation site in site/ (tests/test_docs.py builds it too, warnings as errors)
docs: $(STAMP)
	$(PY) -m mkdocs build --strict

bench: $(STAMP)
	$(PY) tools/bench.py --quick

bench-full: $(STAMP)
	$(PY) tools/bench.py

clean:
	rm -rf $(VENV) .pytest_cache build *.egg-info demo_output site
