/*
 * Small helpers every cpu plugin needs: memory through the host, tensor
 * views, and a parallel_for that degrades to a serial loop.
 */
#include "config.h"

#include <stdlib.h>
#include <sys/mman.h>

#include "sydev_args.h"
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
    return sydev_view2d(t, rows, cols, ld);
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
