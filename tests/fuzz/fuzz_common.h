/*
 * Shared by the fuzz targets (tests/fuzz/fuzz_*.c). Each target defines
 * LLVMFuzzerTestOneInput; it is linked either with libFuzzer (`make fuzz`,
 * clang) or with replay_main.c (`make check`, any compiler), which feeds it
 * the seed corpus and every regression input.
 *
 * The loaders under test read files, so inputs go through a scratch
 * directory private to the process, removed at exit.
 */
#ifndef SY_FUZZ_COMMON_H
#define SY_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The process's scratch directory (created on first use; aborts if it cannot be). */
const char *fuzz_scratch_dir(void);
/*
 * Writes data to <scratch>/<name> (name may hold one subdirectory level,
 * created as needed) and returns the full path in a static buffer that the
 * next call overwrites. Aborts on I/O failure: a harness that cannot write
 * its input must not report the input as harmless.
 */
const char *fuzz_write(const char *name, const void *data, size_t size);

/* With SY_FUZZ_VERBOSE set, prints one line to stderr (what became of an
 * input: the error a loader gave, the status a request got). */
void fuzz_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
