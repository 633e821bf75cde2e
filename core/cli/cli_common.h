/* Options every command shares: -c CONFIG, --set, --plugin-dir, --model, -v/-q. */
#ifndef SY_CLI_COMMON_H
#define SY_CLI_COMMON_H

#include <stdbool.h>

#include "dist/launch.h"
#include "plugin/config.h"
#include "util/util.h"

typedef struct sy_cli_common {
    const char *config_path; /* NULL: SY_DEFAULT_CONFIG */
    char plugin_dirs[8192];  /* colon-separated --plugin-dir values */
    const char *sets[64];    /* --set arguments, applied in order */
    int n_sets;
    const char *model;       /* --model DIR: same as --set model.path=DIR */
    int verbosity;           /* -1 quiet, 0 normal, 1 debug */
} sy_cli_common;

/*
 * Consumes a shared option at argv[*i] (advancing *i past its value).
 * Returns 1 if consumed, 0 if not a shared option, -1 on error (printed).
 */
int sy_cli_common_arg(sy_cli_common *o, int argc, char **argv, int *i);
/* Loads the config file and applies --model and --set; errors are printed. */
int sy_cli_load_config(sy_cli_common *o, sy_config **out);
/* For a command that needs no file: an empty config with SWITCHYARD_SET, --model and --set applied; errors are
 * printed after who ("switchyard doctor"). */
int sy_cli_config_without_file(const sy_cli_common *o, const char *who, sy_config **out);
/* Value of argv[*i + 1] for option argv[*i], or NULL (and a message). */
const char *sy_cli_value(int argc, char **argv, int *i);
/* Parses numbers strictly; prints "switchyard: option --x expects ..., found ..." and returns -1. */
static inline int sy_cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    return sy_opt_int("switchyard", opt, s, lo, hi, out);
}
static inline int sy_cli_float(const char *opt, const char *s, double lo, double hi, double *out)
{
    return sy_opt_float("switchyard", opt, s, lo, hi, out);
}

/*
 * Consumes a tensor-parallel option (--tp N, --nnodes N, --node-rank R,
 * --dist-addr HOST:PORT, --dist-timeout S) like sy_cli_common_arg.
 */
int sy_cli_dist_arg(sy_dist_opts *o, int argc, char **argv, int *i);
/* The help lines for those options. */
#define SY_CLI_DIST_HELP                                                                                     \
    "  --tp N          tensor parallelism over N processes of this node ([comm] plugin shm, the default);\n"  \
    "                  under mpirun with [comm] plugin = mpi the ranks are mpirun's (no --tp needed)\n"       \
    "  --dist-timeout S  bound on the rank rendezvous, every collective and the wait for rank 0 (default 60)\n" \
    "  --nnodes N --node-rank R --dist-addr HOST:PORT  ranks on N nodes without mpirun: the same command on\n"  \
    "                  each node with its own R (0..N-1) and node 0's address; --tp ranks per node, comm tcp\n"

#endif
