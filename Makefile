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

demo: deps
	@$(MAKE) --no-print-directory build
	$(BUILD)/tools/hccl-run/hccl-run -n 4 $(BUILD)/examples/tp_allreduce

bench:
	@echo "make bench: the side-by-side benchmark arrives with the issue 'Intra-host speed'" >&2
	@exit 2

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf build build-address build-undefined build-thread
