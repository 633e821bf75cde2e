/*
 * device/cpu argmax: the greedy pick of each logits row (plugin.h states
 * the rule). A decode step has few rows of 32k-256k columns, so long rows
 * are cut into chunks that the worker pool scans at once; each chunk
 * reports its lowest index of its largest non-NaN value and the chunks
 * are merged in column order with a strict comparison, which keeps the
 * lowest column among equal maxima.
 */
#include "config.h"

#include "device_cpu.h"
#include "sydev_args.h"
#include "sykargmax.h"

/* Columns per chunk: a worker's piece is worth waking it for. */
enum { CHUNK_MIN = 16384, MAX_CHUNKS_PER_ROW = 64, MAX_SLOTS = 1024 };

typedef struct argmax_job {
    sydev_rows x;
    int64_t cpr, chunk; /* chunks per row and columns per chunk */
    int64_t *slot;      /* [rows * cpr] each chunk's pick (cpr > 1) */
    int32_t *ids;       /* the result, written directly when cpr == 1 */
} argmax_job;

static void argmax_units(void *arg, int64_t b, int64_t e, int worker)
{
    (void)worker;
    const argmax_job *j = arg;
    for (int64_t u = b; u < e; u++) {
        const int64_t row = u / j->cpr, c = u % j->cpr;
        const float *r = j->x.p + row * j->x.ld;
        if (j->cpr == 1) {
            /* A NaN at column 0 is the loop's pick; otherwise column 0 is a candidate, so syk_first_max finds one. */
            j->ids[row] = r[0] != r[0] ? 0 : (int32_t)syk_first_max(r, j->x.cols);
            continue;
        }
        const int64_t lo = c * j->chunk;
        const int64_t n = j->x.cols - lo < j->chunk ? j->x.cols - lo : j->chunk;
        const int64_t id = syk_first_max(r + lo, n);
        j->slot[u] = id < 0 ? -1 : lo + id;
    }
}

int sy__cpu_argmax(void *inst, const sy_tensor *x, int32_t *ids_out, float *vals_out, sy_err *err)
{
    sy_cpu_dev *d = inst;
    argmax_job j = {.cpr = 1, .ids = ids_out};
    int rc = sydev_f32_rows(x, "argmax", "x", &j.x, err);
    if (rc)
        return rc;
    if (j.x.cols < 1 || j.x.cols > INT32_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "argmax: x must have 1..%d columns, found %lld", INT32_MAX,
                          (long long)j.x.cols);
    if (j.x.rows > 0 && !ids_out)
        return sy_err_set(err, SY_ERR_INVALID, "argmax: ids_out is NULL");
    if (j.x.rows == 0)
        return SY_OK;
    int64_t cpr = j.x.cols / CHUNK_MIN;
    cpr = cpr > MAX_CHUNKS_PER_ROW ? MAX_CHUNKS_PER_ROW : cpr;
    if (cpr * j.x.rows > MAX_SLOTS)
        cpr = MAX_SLOTS / j.x.rows;
    int64_t slot[MAX_SLOTS];
    if (cpr > 1) {
        j.cpr = cpr;
        j.chunk = (j.x.cols + cpr - 1) / cpr;
        j.slot = slot;
    }
    syk_par_for(&d->par, j.x.rows * j.cpr, 1, argmax_units, &j);
    for (int64_t row = 0; row < j.x.rows; row++) {
        const float *r = j.x.p + row * j.x.ld;
        if (j.cpr > 1) {
            int64_t best = 0; /* a NaN at column 0 stays the pick: nothing compares greater than it */
            if (r[0] == r[0])
                for (int64_t c = 0; c < j.cpr; c++) {
                    const int64_t id = slot[row * j.cpr + c];
                    if (id >= 0 && r[id] > r[best])
                        best = id;
                }
            ids_out[row] = (int32_t)best;
        }
        if (vals_out)
            vals_out[row] = r[ids_out[row]];
    }
    return SY_OK;
}
