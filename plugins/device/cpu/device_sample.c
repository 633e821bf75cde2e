/*
 * device/cpu sample: the host sampler's draw of each logits row (plugin.h
 * states the rule; syksample.h is the code the core's sampler runs too, so
 * the ids are the host's bit for bit). Rows go to the worker pool one per
 * unit; each worker has its own softmax and candidate scratch, kept in the
 * instance and grown to the largest vocabulary seen.
 */
#include "config.h"

#include "device_cpu.h"
#include "sydev_args.h"
#include "syksample.h"

typedef struct sample_job {
    sydev_rows x;
    const sy_sample_row *rows;
    int32_t *ids;
    float *prob;  /* [workers * cols] */
    int32_t *idx; /* [workers * cols] */
} sample_job;

static void sample_units(void *arg, int64_t b, int64_t e, int worker)
{
    const sample_job *j = arg;
    const size_t stride = j->rows[0].struct_size;
    float *prob = j->prob + (size_t)worker * (size_t)j->x.cols;
    int32_t *idx = j->idx + (size_t)worker * (size_t)j->x.cols;
    for (int64_t r = b; r < e; r++) {
        const sy_sample_row *p = (const sy_sample_row *)(const void *)((const char *)j->rows + (size_t)r * stride);
        j->ids[r] = syk_sample_pick(j->x.p + r * j->x.ld, (int32_t)j->x.cols, p, prob, idx);
    }
}

int sy__cpu_sample(void *inst, const sy_tensor *x, const sy_sample_row *rows, int32_t *ids_out, sy_err *err)
{
    sy_cpu_dev *d = inst;
    sample_job j = {.rows = rows, .ids = ids_out};
    int rc = sydev_f32_rows(x, "sample", "x", &j.x, err);
    if (rc)
        return rc;
    if (j.x.cols < 1 || j.x.cols > INT32_MAX)
        return sy_err_set(err, SY_ERR_INVALID, "sample: x must have 1..%d columns, found %lld", INT32_MAX,
                          (long long)j.x.cols);
    if (j.x.rows == 0)
        return SY_OK;
    if (!rows || !ids_out)
        return sy_err_set(err, SY_ERR_INVALID, "sample: %s is NULL", rows ? "ids_out" : "rows");
    if (rows[0].struct_size < sizeof(sy_sample_row))
        return sy_err_set(err, SY_ERR_INVALID, "sample: rows[0].struct_size is %u, expected at least %zu",
                          rows[0].struct_size, sizeof(sy_sample_row));
    for (int64_t r = 0; r < j.x.rows; r++) {
        const sy_sample_row *p = (const sy_sample_row *)(const void *)((const char *)rows + (size_t)r * rows[0].struct_size);
        if (p->temperature > 0.0f && !(p->u >= 0.0 && p->u < 1.0))
            return sy_err_set(err, SY_ERR_INVALID, "sample: rows[%lld].u must be in [0, 1), found %g", (long long)r,
                              p->u);
    }
    const int workers = d->par.n_workers > 0 ? d->par.n_workers : 1;
    const size_t need = (size_t)workers * (size_t)j.x.cols;
    if (need > d->sample_cap) {
        syk_free(d->host, d->sample_prob);
        syk_free(d->host, d->sample_idx);
        d->sample_cap = 0;
        d->sample_prob = syk_alloc(d->host, need * sizeof(float), 64);
        d->sample_idx = syk_alloc(d->host, need * sizeof(int32_t), 64);
        if (!d->sample_prob || !d->sample_idx)
            return sy_err_set(err, SY_ERR_NOMEM, "sample: cannot allocate scratch for %d workers x %lld tokens",
                              workers, (long long)j.x.cols);
        d->sample_cap = need;
    }
    j.prob = d->sample_prob;
    j.idx = d->sample_idx;
    syk_par_for(&d->par, j.x.rows, 1, sample_units, &j);
    return SY_OK;
}
