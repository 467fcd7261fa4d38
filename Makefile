# attnlab: `make` builds the commands, `make check` installs what is missing,
# builds and runs the tests, `make check-asan` runs them under ASan + UBSan.

CC ?= cc
# OpenBLAS's OpenMP build: our own loops use OpenMP too, so both share one
# thread pool. Debian installs its pkg-config file beside the library.
MULTIARCH := $(shell $(CC) -print-multiarch 2>/dev/null)
BLAS_DIR := /usr/lib/$(MULTIARCH)/openblas-openmp
PKG_CONFIG := PKG_CONFIG_PATH=$(BLAS_DIR)/pkgconfig$${PKG_CONFIG_PATH:+:$$PKG_CONFIG_PATH} pkg-config
PKGS := openblas libcjson stb plplot
TEST_PKGS := check

NATIVE := $(shell $(CC) -march=native -E -x c /dev/null >/dev/null 2>&1 && echo -march=native)
WARN := -Wall -Wextra -Werror
BASE_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) -fopenmp -Icore
OPT := -O2 $(NATIVE)
ASAN := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined

# pkg-config runs in the sub-make below, after `deps` has installed it.
DEP_CFLAGS = $(shell $(PKG_CONFIG) --cflags $(PKGS) $(TEST_PKGS))
DEP_LIBS = $(shell $(PKG_CONFIG) --libs $(PKGS)) -Wl,-rpath,$(BLAS_DIR) -lm
# The tests count our own calls to the allocator (tests/test_engine.c).
TEST_WRAP := -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=aligned_alloc
TEST_LIBS = $(shell $(PKG_CONFIG) --libs $(TEST_PKGS))

CORE_SRC := $(wildcard core/*.c)
TEST_SRC := $(wildcard tests/*.c)
COMMANDS := bench

BUILD ?= build
FLAVOUR_CFLAGS ?= $(OPT)

.PHONY: all check check-asan clean deps build-all run-tests run-tests-asan fixtures

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

run-tests-asan: $(BUILD)/test_all
	ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	    ./$(BUILD)/test_all

$(BUILD)/%.o: %.c $(wildcard core/*.h) $(wildcard tests/*.h)
	@mkdir -p $(dir $@)
	$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $(DEP_CFLAGS) -c $< -o $@

CORE_OBJ = $(CORE_SRC:%.c=$(BUILD)/%.o)

$(BUILD)/test_all: $(CORE_OBJ) $(TEST_SRC:%.c=$(BUILD)/%.o)
	$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(TEST_WRAP) $(TEST_LIBS) $(DEP_LIBS)

bench: $(CORE_OBJ) $(BUILD)/experiments/bench.o
	$(CC) $(BASE_CFLAGS) $(FLAVOUR_CFLAGS) $^ -o $@ $(DEP_LIBS)

# Regenerates the PyTorch fixtures (needs Debian's python3-torch); the
# results are committed so that the tests need no PyTorch.
fixtures:
	/usr/bin/python3 tests/reference/ops.py tests/fixtures/ops.safetensors

clean:
	rm -rf build build-asan $(COMMANDS)
