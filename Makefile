# hostccl: the two commands of the contract are `make demo` and `make test`.
BUILD    ?= build
SANITIZE ?=
PREFIX   ?= /usr/local
JOBS     ?= $(shell nproc)
CMAKE_FLAGS ?=

ifneq ($(SANITIZE),)
BUILD := build-$(SANITIZE)
CMAKE_FLAGS += -DSANITIZE=$(SANITIZE)
endif

.PHONY: all deps build test demo bench install clean

all: build

deps:
	@scripts/deps.sh test

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS)

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

# Every test runs under CTest with its own hard timeout (tests/CMakeLists.txt).
test: deps
	@$(MAKE) --no-print-directory build
	cd $(BUILD) && ctest --output-on-failure -j 2 --timeout 300

# The inference demo (docs/examples.md): a small transformer generating tokens with TP x PP on 4
# ranks, dense and then MoE (AlltoAllV expert dispatch), each checked bit for bit against a
# single-rank run. DEMO_ARGS goes to both runs (--layers 8 --hidden 2048, --modes serial, ...).
DEMO_ARGS ?=
demo:
	@scripts/deps.sh demo
	@$(MAKE) --no-print-directory build
	HCCL_DETERMINISTIC=true $(BUILD)/tools/hccl-run/hccl-run -n 4 $(BUILD)/examples/demo $(DEMO_ARGS)
	HCCL_DETERMINISTIC=true $(BUILD)/tools/hccl-run/hccl-run -n 4 $(BUILD)/examples/demo --moe alltoall $(DEMO_ARGS)

# Side by side with Open MPI, MPICH, Gloo and memcpy (docs/performance.md); about 20 minutes on
# two cores, never part of `make test`. BENCH_ARGS goes to the driver (--quick, --collectives ...).
# Then the multi-host section on two network-namespace hosts (docs/multihost.md; root only).
BENCH_ARGS ?=
bench:
	@scripts/deps.sh bench
	@$(MAKE) --no-print-directory build
	$(MAKE) --no-print-directory -C bench peers OUT=$(abspath $(BUILD))/bench
	python3 bench/bench.py --build $(BUILD) $(BENCH_ARGS)
	python3 bench/multihost.py --build $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-address build-undefined build-thread build-fuzz

# ---- long-running suites, never part of `make test` (docs/testing.md) ----------------------------
FUZZ_BUILD   ?= build-fuzz
FUZZ_SECONDS ?= 60
SOAK_RANKS   ?= 4
SOAK_ARGS    ?=

.PHONY: fuzz soak fault

# libFuzzer targets, built with clang and ASan+UBSan in $(FUZZ_BUILD)/, FUZZ_SECONDS each.
fuzz:
	@command -v clang >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get install -y clang || { apt-get update && apt-get install -y clang; }; \
	  else echo "make fuzz needs clang (libFuzzer): sudo apt-get install -y clang" >&2; exit 2; fi; }
	cmake -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DHOSTCCL_FUZZ=ON
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_root_info fuzz_rendezvous fuzz_store fuzz_rank_table fuzz_net_stream
	tests/fuzz/run_fuzz.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

# One million random collectives on SOAK_RANKS ranks, every result checked; leaks fail it.
soak: deps
	@$(MAKE) --no-print-directory build
	$(BUILD)/tools/hccl-run/hccl-run -n $(SOAK_RANKS) $(BUILD)/tests/soak/soak $(SOAK_ARGS)

# The fault-injection suite with 200 kill -9 trials; the build goes back to make test's 20 after.
fault: deps
	cmake -S . -B $(BUILD) -DCMAKE_INSTALL_PREFIX=$(PREFIX) $(CMAKE_FLAGS) -DHC_FAULT_KILL_TRIALS=200
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && status=0 && { ctest --output-on-failure -j 2 -L fault || status=$$?; } && \
	  cmake -U HC_FAULT_KILL_TRIALS . >/dev/null && exit $$status
