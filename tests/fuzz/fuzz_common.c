/*
 * Scratch files for the fuzz targets. libFuzzer gives a target no context
 * argument, so the directory lives in one static struct, set up once per
 * process and removed by an atexit handler.
 */
#include "config.h"

#include "fuzz_common.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static struct {
    char dir[1024];
    char path[2048]; /* dir + "/" + a name of at most 1000 bytes */
    int verbose;     /* 0 unknown, 1 no, 2 yes */
} scratch;

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *e;
    char p[PATH_MAX];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static void cleanup(void) { remove_tree(scratch.dir); }

const char *fuzz_scratch_dir(void)
{
    if (scratch.dir[0])
        return scratch.dir;
    /* Every input is written and read back: a RAM file system (/dev/shm)
     * runs the file-based targets several times faster than a disk. */
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !*tmp)
        tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(scratch.dir, sizeof scratch.dir, "%s/sy-fuzz-XXXXXX", tmp);
    if (!mkdtemp(scratch.dir)) {
        fprintf(stderr, "fuzz: cannot create a scratch directory %s: %s\n", scratch.dir, strerror(errno));
        abort();
    }
    atexit(cleanup);
    return scratch.dir;
}

const char *fuzz_write(const char *name, const void *data, size_t size)
{
    const char *dir = fuzz_scratch_dir();
    if (strlen(name) > 1000)
        abort(); /* the harnesses use short fixed names */
    const char *slash = strchr(name, '/');
    if (slash) {
        int n = snprintf(scratch.path, sizeof scratch.path, "%s/%.*s", dir, (int)(slash - name), name);
        if (n < 0 || (size_t)n >= sizeof scratch.path)
            abort();
        if (mkdir(scratch.path, 0700) != 0 && errno != EEXIST) {
            fprintf(stderr, "fuzz: mkdir %s: %s\n", scratch.path, strerror(errno));
            abort();
        }
    }
    int n = snprintf(scratch.path, sizeof scratch.path, "%s/%s", dir, name);
    if (n < 0 || (size_t)n >= sizeof scratch.path)
        abort();
    FILE *f = fopen(scratch.path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", scratch.path, strerror(errno));
        abort();
    }
    return scratch.path;
}

void fuzz_note(const char *fmt, ...)
{
    if (!scratch.verbose)
        scratch.verbose = getenv("SY_FUZZ_VERBOSE") ? 2 : 1;
    if (scratch.verbose != 2)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}
