/*
 * Replays inputs through one fuzz target without libFuzzer, so `make check`
 * (any compiler) exercises every target and keeps each fixed crash fixed.
 *
 *   replay_<target> [FILE|DIR]...
 *
 * Without arguments it replays $SY_SRCDIR/tests/fuzz/corpus/<target>/ and
 * $SY_SRCDIR/tests/fuzz/regressions/<target>/. A missing or empty corpus
 * fails: a replay that ran nothing must not pass. A crash is the failure
 * the sanitizers (or a signal) report; the driver prints each file first
 * so the log names the input.
 */
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz_common.h"

#ifndef FUZZ_TARGET
#error "FUZZ_TARGET (the target's name) must be defined"
#endif

static int replay_file(const char *path, size_t *count)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "replay: cannot open %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t cap = 4096, len = 0;
    unsigned char *buf = malloc(cap);
    size_t r;
    while (buf && (r = fread(buf + len, 1, cap - len, f)) > 0) {
        len += r;
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            }
            buf = nb;
        }
    }
    int bad = ferror(f);
    fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "replay: cannot read %s\n", path);
        free(buf);
        return -1;
    }
    fprintf(stderr, "replay %s: %s (%zu bytes)\n", FUZZ_TARGET, path, len);
    /* An exact-size copy, so ASan catches a read one past the input. */
    unsigned char *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    (*count)++;
    return 0;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every regular file in dir, in name order (stable logs). */
static int replay_dir(const char *dir, size_t *count)
{
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "replay: cannot open directory %s: %s\n", dir, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            char **nn = realloc(names, cap * sizeof *names);
            if (!nn)
                break;
            names = nn;
        }
        names[n] = strdup(e->d_name);
        if (names[n])
            n++;
    }
    closedir(d);
    qsort(names, n, sizeof *names, cmp_names);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/%s", dir, names[i]);
        struct stat sb;
        if (stat(p, &sb) == 0 && S_ISREG(sb.st_mode) && replay_file(p, count) < 0)
            rc = -1;
        free(names[i]);
    }
    free(names);
    return rc;
}

static int replay_path(const char *p, size_t *count)
{
    struct stat sb;
    if (stat(p, &sb) != 0) {
        fprintf(stderr, "replay: %s: %s\n", p, strerror(errno));
        return -1;
    }
    return S_ISDIR(sb.st_mode) ? replay_dir(p, count) : replay_file(p, count);
}

int main(int argc, char **argv)
{
    size_t count = 0;
    int rc = 0;
    if (argc > 1) {
        for (int i = 1; i < argc; i++)
            rc |= replay_path(argv[i], &count);
    } else {
        const char *src = getenv("SY_SRCDIR");
        if (!src || !*src) {
            fprintf(stderr, "replay: SY_SRCDIR is not set (expected the source tree with tests/fuzz/corpus/)\n");
            return 1;
        }
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/tests/fuzz/corpus/%s", src, FUZZ_TARGET);
        size_t before = count;
        rc |= replay_dir(p, &count);
        if (count == before) {
            fprintf(stderr, "replay: no seed inputs in %s (expected at least one)\n", p);
            return 1;
        }
        snprintf(p, sizeof p, "%s/tests/fuzz/regressions/%s", src, FUZZ_TARGET);
        struct stat sb;
        if (stat(p, &sb) == 0) /* a target may have no regression yet */
            rc |= replay_dir(p, &count);
    }
    printf("replay %s: %zu inputs, no crash\n", FUZZ_TARGET, count);
    return rc ? 1 : 0;
}
