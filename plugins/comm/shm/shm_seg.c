/*
 * comm/shm: the shared segment, joining it, and the bounded epoch barrier
 * (see shm_seg.h for the layout and the protocol).
 *
 * Every wait spins briefly, then yields, and from then on checks the clock,
 * the group's abort record and the pids of the ranks it waits for, so a
 * crashed peer is reported in milliseconds and a stuck one at the timeout.
 */
#include "config.h"

#include "shm_seg.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC 0x5953484du /* "SYSHM" */
#define SPINS_BEFORE_YIELD 4000
#define YIELDS_PER_CHECK 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* 1 when pid is gone or a zombie (kill(pid, 0) still succeeds on a zombie). */
static int pid_dead(pid_t pid)
{
    if (pid <= 0)
        return 0;
    if (kill(pid, 0) != 0)
        return errno == ESRCH;
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

static size_t align_up(size_t v, size_t a)
{
    return (v + a - 1) / a * a;
}

static size_t data_offset(int world)
{
    return align_up(align_up(sizeof(shm_hdr), 64) + (size_t)world * sizeof(shm_line), 4096);
}

int shm_seg_fail(shm_seg *s, int code, sy_err *err)
{
    if (!s->broken) {
        s->broken = 1;
        snprintf(s->broken_msg, sizeof s->broken_msg, "%s", err ? err->msg : "a collective failed");
    }
    if (s->hdr) {
        int32_t expect = -1;
        if (atomic_compare_exchange_strong(&s->hdr->abort_rank, &expect, -2)) {
            snprintf(s->hdr->abort_msg, sizeof s->hdr->abort_msg, "%s", s->broken_msg);
            atomic_store_explicit(&s->hdr->abort_rank, s->rank, memory_order_release);
        }
    }
    return code;
}

static const char *desc_name(uint64_t desc)
{
    switch (desc >> 56) {
    case 1: return "join";
    case 2: return "barrier";
    case 3: return "allreduce_sum";
    case 4: return "allgather";
    case 5: return "broadcast";
    default: return "?";
    }
}

/* The slow path of a wait for rank j to reach epoch e: abort, death, timeout. */
static int check_peer(shm_seg *s, int j, uint64_t e, double t0, const char *what, sy_err *err)
{
    shm_line *l = &s->lines[j];
    /* It may have arrived since the caller looked (and even finished and
     * exited): only a rank that has not arrived can be the problem. */
    if (atomic_load_explicit(&l->epoch, memory_order_acquire) >= e)
        return SY_OK;
    int32_t ab = atomic_load_explicit(&s->hdr->abort_rank, memory_order_acquire);
    if (ab >= 0 && ab != s->rank) {
        sy_err_set(err, SY_ERR_UNAVAILABLE, "comm shm: rank %d gave up, so rank %d stops in %s: %s", ab, s->rank,
                   what, s->hdr->abort_msg);
        return shm_seg_fail(s, SY_ERR_UNAVAILABLE, err);
    }
    pid_t pid = atomic_load_explicit(&l->pid, memory_order_acquire);
    const int gone = atomic_load_explicit(&l->left, memory_order_acquire) ? 1 : pid_dead(pid) ? 2 : 0;
    if (gone && atomic_load_explicit(&l->epoch, memory_order_acquire) >= e)
        return SY_OK;
    if (gone == 1) {
        sy_err_set(err, SY_ERR_UNAVAILABLE, "comm shm: rank %d (pid %d) left the group while rank %d waits in %s",
                   j, (int)pid, s->rank, what);
        return shm_seg_fail(s, SY_ERR_UNAVAILABLE, err);
    }
    if (gone == 2) {
        sy_err_set(err, SY_ERR_UNAVAILABLE, "comm shm: rank %d (pid %d) died; rank %d gives up %s", j, (int)pid,
                   s->rank, what);
        return shm_seg_fail(s, SY_ERR_UNAVAILABLE, err);
    }
    if (s->timeout_s > 0 && now_s() - t0 > s->timeout_s) {
        if (pid)
            sy_err_set(err, SY_ERR_UNAVAILABLE,
                       "comm shm: rank %d timed out after %.1f s in %s waiting for rank %d (pid %d)", s->rank,
                       s->timeout_s, what, j, (int)pid);
        else
            sy_err_set(err, SY_ERR_UNAVAILABLE,
                       "comm shm: rank %d timed out after %.1f s in %s: rank %d never joined \"%s\"", s->rank,
                       s->timeout_s, what, j, s->name);
        return shm_seg_fail(s, SY_ERR_UNAVAILABLE, err);
    }
    return SY_OK;
}

int shm_seg_barrier(shm_seg *s, uint64_t desc, int check, const char *what, sy_err *err)
{
    if (s->broken)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm shm: the group is broken: %s", s->broken_msg);
    const uint64_t e = ++s->epoch;
    shm_line *me = &s->lines[s->rank];
    atomic_store_explicit(&me->desc[e & 1], desc, memory_order_relaxed);
    atomic_store_explicit(&me->epoch, e, memory_order_release);
    double t0 = 0;
    for (int j = 0; j < s->world; j++) {
        shm_line *l = &s->lines[j];
        unsigned spins = 0;
        while (atomic_load_explicit(&l->epoch, memory_order_acquire) < e) {
            if (++spins < SPINS_BEFORE_YIELD) {
                cpu_relax();
                continue;
            }
            sched_yield();
            if (t0 == 0)
                t0 = now_s();
            if ((spins - SPINS_BEFORE_YIELD) % YIELDS_PER_CHECK == 0) {
                int rc = check_peer(s, j, e, t0, what, err);
                if (rc)
                    return rc;
            }
        }
    }
    if (check) {
        for (int j = 0; j < s->world; j++) {
            uint64_t d = atomic_load_explicit(&s->lines[j].desc[e & 1], memory_order_relaxed);
            if (d != desc) {
                sy_err_set(err, SY_ERR_INVALID,
                           "comm shm: rank %d called %s (%llu bytes) while rank %d called %s (%llu bytes): every "
                           "rank must make the same collectives with the same sizes",
                           j, desc_name(d), (unsigned long long)(d & ((1ull << 56) - 1)), s->rank, desc_name(desc),
                           (unsigned long long)(desc & ((1ull << 56) - 1)));
                return shm_seg_fail(s, SY_ERR_INVALID, err);
            }
        }
    }
    return SY_OK;
}

static int make_name(shm_seg *s, const char *rendezvous, sy_err *err)
{
    if (!rendezvous || !*rendezvous)
        return sy_err_set(err, SY_ERR_INVALID, "comm shm: setup needs a rendezvous name (unique per run)");
    size_t n = strlen(rendezvous);
    if (n > 200)
        return sy_err_set(err, SY_ERR_INVALID, "comm shm: rendezvous \"%.40s...\" is %zu characters, at most 200",
                          rendezvous, n);
    int len = snprintf(s->name, sizeof s->name, "/sy-shm-");
    for (size_t i = 0; i < n; i++) {
        char ch = rendezvous[i];
        int ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                 ch == '_' || ch == '.';
        s->name[len++] = ok ? ch : '_';
    }
    s->name[len] = 0;
    return SY_OK;
}

static int create_segment(shm_seg *s, size_t total, sy_err *err)
{
    int fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd < 0 && errno == EEXIST) {
        /* Left over by a crashed run with the same rendezvous: replace it. */
        shm_unlink(s->name);
        fd = shm_open(s->name, O_CREAT | O_EXCL | O_RDWR, 0600);
    }
    if (fd < 0)
        return sy_err_set(err, SY_ERR_UNAVAILABLE, "comm shm: shm_open(%s): %s", s->name, strerror(errno));
    if (ftruncate(fd, (off_t)total) != 0) {
        int e = errno;
        close(fd);
        shm_unlink(s->name);
        return sy_err_set(err, SY_ERR_NOMEM, "comm shm: cannot size %s to %zu bytes: %s", s->name, total,
                          strerror(e));
    }
    void *p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) {
        shm_unlink(s->name);
        return sy_err_set(err, SY_ERR_NOMEM, "comm shm: mmap of %zu bytes: %s", total, strerror(e));
    }
    s->base = p;
    s->map_bytes = total;
    s->hdr = p;
    s->hdr->world = (uint32_t)s->world;
    s->hdr->slot_size = s->slot_size;
    s->hdr->total_bytes = total;
    atomic_store(&s->hdr->abort_rank, -1);
    s->lines = (shm_line *)((char *)p + align_up(sizeof(shm_hdr), 64));
    atomic_store(&s->lines[0].pid, (int32_t)getpid());
    atomic_store_explicit(&s->hdr->magic, SHM_MAGIC, memory_order_release);
    return SY_OK;
}

/* One attempt to open rank 0's segment: 1 done, 0 not there yet, < 0 error. */
static int try_open(shm_seg *s, sy_err *err)
{
    int fd = shm_open(s->name, O_RDWR, 0);
    if (fd < 0)
        return errno == ENOENT ? 0 : sy_err_set(err, SY_ERR_UNAVAILABLE, "comm shm: shm_open(%s): %s", s->name,
                                                strerror(errno));
    struct stat st;
    const size_t hdr_bytes = data_offset(1);
    if (fstat(fd, &st) != 0 || (size_t)st.st_size < hdr_bytes) {
        close(fd);
        return 0;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return sy_err_set(err, SY_ERR_NOMEM, "comm shm: mmap of %s: %s", s->name, strerror(errno));
    shm_hdr *h = p;
    shm_line *lines = (shm_line *)((char *)p + align_up(sizeof(shm_hdr), 64));
    if (atomic_load_explicit(&h->magic, memory_order_acquire) != SHM_MAGIC || pid_dead(atomic_load(&lines[0].pid))) {
        munmap(p, (size_t)st.st_size); /* not initialised yet, or stale: rank 0 will replace it */
        return 0;
    }
    if (h->world != (uint32_t)s->world || h->slot_size != s->slot_size || h->total_bytes != (uint64_t)st.st_size) {
        sy_err_set(err, SY_ERR_INVALID,
                   "comm shm: rank 0 made %s for %u ranks with slot_size %llu, but rank %d has world_size %d and "
                   "slot_size %zu: every rank needs the same [comm] keys",
                   s->name, h->world, (unsigned long long)h->slot_size, s->rank, s->world, s->slot_size);
        munmap(p, (size_t)st.st_size);
        return SY_ERR_INVALID;
    }
    s->base = p;
    s->map_bytes = (size_t)st.st_size;
    s->hdr = h;
    s->lines = lines;
    return 1;
}

int shm_seg_join(shm_seg *s, int rank, int world, const char *rendezvous, size_t slot_size, double timeout_s,
                 sy_err *err)
{
    s->rank = rank;
    s->world = world;
    s->slot_size = slot_size;
    s->timeout_s = timeout_s;
    int rc = make_name(s, rendezvous, err);
    if (rc)
        return rc;
    const size_t total = data_offset(world) + (2 * (size_t)world + 2) * slot_size;
    if (rank == 0) {
        rc = create_segment(s, total, err);
        if (rc)
            return rc;
    } else {
        const double t0 = now_s();
        while ((rc = try_open(s, err)) == 0) {
            if (timeout_s > 0 && now_s() - t0 > timeout_s)
                return sy_err_set(err, SY_ERR_UNAVAILABLE,
                                  "comm shm: rank %d timed out after %.1f s waiting for rank 0 to create %s", rank,
                                  timeout_s, s->name);
            sleep_ms(1);
        }
        if (rc < 0)
            return rc;
        atomic_store_explicit(&s->lines[rank].pid, (int32_t)getpid(), memory_order_release);
    }
    s->data = (unsigned char *)s->base + data_offset(world);
    rc = shm_seg_barrier(s, (1ull << 56) | (uint64_t)world, 1, "joining the group", err);
    if (rc == SY_OK && rank == 0) {
        /* Every rank has it mapped: the name is no longer needed, and a crash
         * from here on leaves nothing behind in /dev/shm. */
        shm_unlink(s->name);
        s->unlinked = 1;
    }
    return rc;
}

void shm_seg_leave(shm_seg *s)
{
    if (s->lines)
        atomic_store_explicit(&s->lines[s->rank].left, 1, memory_order_release);
    if (s->base)
        munmap(s->base, s->map_bytes);
    if (s->rank == 0 && s->hdr && !s->unlinked)
        shm_unlink(s->name);
    s->base = NULL;
    s->hdr = NULL;
    s->lines = NULL;
    s->data = NULL;
}
