/*
 * What every fuzz target in this folder shares: the two libFuzzer entry points it defines, and the
 * quiet default for logs. A target is built twice: with clang and -fsanitize=fuzzer for real
 * fuzzing (HOSTCCL_FUZZ=ON, `make fuzz`), and with the ordinary compiler against smoke_main.c, a
 * small deterministic driver that `make test` runs over the seed corpus (docs/testing.md).
 */
#ifndef HC_FUZZ_TARGET_H
#define HC_FUZZ_TARGET_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Called once before the first input; returns 0. */
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Run one input; returns 0 (libFuzzer reserves other values). A broken property aborts. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Most inputs are refused with a warning; a million warnings a minute would make the run about
 * writing to stderr. Logs are therefore off unless ASCEND_GLOBAL_LOG_LEVEL asks for them (`make fuzz`
 * sets level 0 and discards stderr, so that every log line is still formatted from the fuzzed
 * values). Assertion failures print whatever the level.
 */
static inline void fuzz_logs_default_off(void)
{
    setenv("ASCEND_GLOBAL_LOG_LEVEL", "4", 0);
}

#endif /* HC_FUZZ_TARGET_H */
