/*
 * Small helpers every cpu plugin needs: memory through the host, tensor
 * views, and a parallel_for that degrades to a serial loop.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "sykern.h"

#define HUGE_PAGE ((size_t)2 << 20)

void *syk_alloc(const sy_host *host, size_t size, size_t align)
{
    if (size == 0)
        size = 1;
    if (align < sizeof(void *))
        align = sizeof(void *);
    /*
     * Big buffers (KV cache, MoE scratch) are read at random 4 KB tiles; with
     * 4 KB pages every tile is a TLB miss, and under a hypervisor's nested
     * paging a miss costs a two-dimensional page walk. Align them to 2 MB and
     * ask for transparent huge pages (THP is often "madvise" only).
     */
    const int big = size >= 4 * HUGE_PAGE;
    if (big && align < HUGE_PAGE)
        align = HUGE_PAGE;
    void *p = NULL;
    if (host && host->alloc && host->free)
        p = host->alloc(host->ctx, size, align);
    else if (posix_memalign(&p, align, size) != 0)
        p = NULL;
#ifdef MADV_HUGEPAGE
    if (p && big)
        (void)madvise(p, size / HUGE_PAGE * HUGE_PAGE, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    return p;
}

void syk_free(const sy_host *host, void *p)
{
    if (!p)
        return;
    if (host && host->alloc && host->free)
        host->free(host->ctx, p);
    else
        free(p);
}

int syk_view2d(const sy_tensor *t, int64_t *rows, int64_t *cols, int64_t *ld)
{
    if (!t || t->ndim < 1 || t->ndim > SY_MAX_DIMS)
        return -1;
    const int nd = t->ndim;
    if (t->shape[nd - 1] > 1 && t->stride[nd - 1] != 1)
        return -1;
    int64_t r = 1;
    for (int i = 0; i < nd - 1; i++) {
        if (t->shape[i] < 0)
            return -1;
        r *= t->shape[i];
    }
    *cols = t->shape[nd - 1];
    *rows = r;
    if (nd == 1) {
        *ld = *cols;
        return *cols < 0 ? -1 : 0;
    }
    /* Row stride from the innermost outer dim; the dims above must be dense over it. */
    int64_t s = t->stride[nd - 2];
    for (int i = nd - 3; i >= 0; i--)
        if (t->shape[i] > 1 && t->stride[i] != t->stride[i + 1] * t->shape[i + 1])
            return -1;
    if (r > 1 && s < *cols)
        return -1;
    *ld = r > 1 ? s : (s > *cols ? s : *cols);
    return 0;
}

void syk_par_for(const syk_par *par, int64_t n, int64_t grain, sy_range_fn fn, void *arg)
{
    if (n <= 0)
        return;
    if (par && par->run && par->n_workers > 1 && n > grain)
        par->run(par->ctx, n, grain, fn, arg);
    else
        fn(arg, 0, n, 0);
}

syk_par syk_par_from_host(const sy_host *host)
{
    syk_par p = {NULL, NULL, 1};
    if (host && host->parallel_for && host->n_workers) {
        p.run = host->parallel_for;
        p.ctx = host->ctx;
        p.n_workers = host->n_workers(host->ctx);
        if (p.n_workers < 1)
            p.n_workers = 1;
    }
    return p;
}
