/*
 * The figures of one level, as SGLang's bench_serving computes them
 * (calculate_metrics): over the successful requests only; percentiles with
 * numpy's default linear interpolation; latencies in milliseconds.
 */
#include "config.h"

#include "bench/bench.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_percentile(double *v, size_t n, double p)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof *v, cmp_double);
    double rank = p / 100.0 * (double)(n - 1);
    size_t lo = (size_t)floor(rank);
    size_t hi = lo + 1 < n ? lo + 1 : lo;
    double f = rank - (double)lo;
    return v[lo] + (v[hi] - v[lo]) * f;
}

static double mean(const double *v, size_t n)
{
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += v[i];
    return n ? s / (double)n : 0;
}

/* mean, p50, p90, p99 of v (ms), v sorted in place */
static void summarize(double *v, size_t n, double *m, double *p50, double *p90, double *p99)
{
    for (size_t i = 0; i < n; i++)
        v[i] *= 1000.0;
    *m = mean(v, n);
    *p50 = bench_percentile(v, n, 50);
    *p90 = bench_percentile(v, n, 90);
    *p99 = bench_percentile(v, n, 99);
}

void bench_compute_stats(const bench_result *r, size_t n, double duration, bench_stats *s)
{
    int conc = s->concurrency;
    double rate = s->request_rate;
    memset(s, 0, sizeof *s);
    s->concurrency = conc;
    s->request_rate = rate;
    s->duration = duration;
    size_t n_itl = 0;
    double t_min = INFINITY, t_max = 0;
    for (size_t i = 0; i < n; i++) {
        s->resent += r[i].resent;
        if (!r[i].ok) {
            s->failed++;
            if (!s->first_error[0])
                snprintf(s->first_error, sizeof s->first_error, "%s", r[i].error ? r[i].error : "failed");
            continue;
        }
        s->completed++;
        s->total_input += r[i].prompt_tokens;
        s->total_output += r[i].output_tokens;
        n_itl += r[i].n_itl;
        if (r[i].start < t_min)
            t_min = r[i].start;
        if (r[i].start + r[i].latency > t_max)
            t_max = r[i].start + r[i].latency;
    }
    if (duration > 0) {
        s->request_throughput = (double)s->completed / duration;
        s->input_throughput = (double)s->total_input / duration;
        s->output_throughput = (double)s->total_output / duration;
        s->total_throughput = (double)(s->total_input + s->total_output) / duration;
    }
    size_t nc = (size_t)s->completed;
    double *ttft = calloc(nc + 1, sizeof *ttft), *tpot = calloc(nc + 1, sizeof *tpot);
    double *e2e = calloc(nc + 1, sizeof *e2e), *itl = calloc(n_itl + 1, sizeof *itl);
    /* peak output: token arrivals in 1-second buckets from the first start */
    size_t nb = nc ? (size_t)ceil(t_max - t_min) + 1 : 1;
    double *bucket = calloc(nb, sizeof *bucket);
    if (!ttft || !tpot || !e2e || !itl || !bucket)
        goto out;
    size_t k = 0, nt = 0, ni = 0;
    for (size_t i = 0; i < n; i++) {
        if (!r[i].ok)
            continue;
        ttft[k] = r[i].ttft;
        e2e[k] = r[i].latency;
        k++;
        if (r[i].output_tokens > 1)
            tpot[nt++] = (r[i].latency - r[i].ttft) / (double)(r[i].output_tokens - 1);
        memcpy(itl + ni, r[i].itl, r[i].n_itl * sizeof *itl);
        ni += r[i].n_itl;
        if (r[i].n_chunks > 0) {
            double t = r[i].start + r[i].ttft;
            size_t b = (size_t)(t - t_min);
            if (b < nb)
                bucket[b] += 1;
            for (size_t j = 0; j < r[i].n_itl; j++) {
                t += r[i].itl[j];
                b = (size_t)(t - t_min);
                if (b < nb)
                    bucket[b] += 1;
            }
        }
    }
    for (size_t b = 0; b < nb; b++)
        if (bucket[b] > s->peak_output_throughput)
            s->peak_output_throughput = bucket[b];
    summarize(ttft, k, &s->ttft_mean, &s->ttft_p50, &s->ttft_p90, &s->ttft_p99);
    summarize(tpot, nt, &s->tpot_mean, &s->tpot_p50, &s->tpot_p90, &s->tpot_p99);
    summarize(itl, ni, &s->itl_mean, &s->itl_p50, &s->itl_p90, &s->itl_p99);
    summarize(e2e, k, &s->e2e_mean, &s->e2e_p50, &s->e2e_p90, &s->e2e_p99);
    /* concurrency actually reached: total request time over the duration */
    double busy = 0;
    for (size_t i = 0; i < k; i++)
        busy += e2e[i] / 1000.0;
    s->max_concurrency_seen = duration > 0 ? busy / duration : 0;
out:
    free(ttft);
    free(tpot);
    free(e2e);
    free(itl);
    free(bucket);
}
