#!/bin/sh
# Run every libFuzzer target of a HOSTCCL_FUZZ=ON build for SECONDS each (`make fuzz`).
#
# usage: tests/fuzz/run_fuzz.sh BUILD_DIR [SECONDS] [TARGET...]
#
# Each target starts from a scratch copy of its seed corpus (BUILD_DIR/fuzz-work/NAME/corpus), so
# the committed seeds stay small and hand-made; crashes land in BUILD_DIR/fuzz-work/NAME/ as
# crash-*/leak-*/timeout-* files to replay with `fuzz_NAME FILE`. Logs are on at debug level so that
# every log line is formatted from fuzzed values, and stderr is discarded (-close_fd_mask=2; the
# sanitizers' reports still come out). Exit status: 0 when no target failed.
set -u
build=${1:?usage: run_fuzz.sh BUILD_DIR [SECONDS] [TARGET...]}
seconds=${2:-60}
[ $# -ge 2 ] && shift 2 || shift $#
targets=${*:-root_info rendezvous store rank_table}
here=$(cd "$(dirname "$0")" && pwd)
status=0

for name in $targets; do
    bin=$build/tests/fuzz/fuzz_$name
    work=$build/fuzz-work/$name
    if [ ! -x "$bin" ]; then
        echo "run_fuzz: $bin is missing: configure with -DHOSTCCL_FUZZ=ON and CC=clang" >&2
        exit 2
    fi
    rm -rf "$work/corpus"
    mkdir -p "$work/corpus"
    cp "$here/corpus/$name"/* "$work/corpus/"
    echo "== fuzz_$name for $seconds s"
    if ! ASCEND_GLOBAL_LOG_LEVEL=0 "$bin" -max_total_time="$seconds" -dict="$here/$name.dict" \
            -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$work/" "$work/corpus" \
            >"$work/fuzz.log" 2>&1; then
        status=1
        echo "run_fuzz: fuzz_$name FAILED; see $work/fuzz.log" >&2
        tail -n 40 "$work/fuzz.log" >&2
    fi
    # The last status line and the final statistics: executions, speed, coverage, corpus.
    grep -E '^#[0-9]+.*(DONE|pulse)|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb' \
        "$work/fuzz.log" | tail -n 4
done
exit $status
