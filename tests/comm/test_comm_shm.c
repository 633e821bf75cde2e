/*
 * comm/shm across forked ranks: allreduce (one-shot, two-shot, auto around
 * the crossover, across chunk boundaries, odd counts) is bitwise equal on
 * every rank and to the serial rank-order sum; allgather and broadcast
 * across chunks; mismatched collectives are refused; a rank that dies, one
 * that is stuck, one that leaves and one that never joins make the others
 * fail with a clear message within the timeout instead of hanging.
 * comm/local's setup accepts one rank only.
 */
#include "config.h"

#include "../unit/test_check.h"
#include "comm_harness.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOT 4096 /* small slots: 1024 floats per chunk */

typedef struct case_arg {
    const char *algorithm;
    double timeout_s;
} case_arg;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int open_rank(comm_rank *r, const char *algorithm, int rank, int world, const char *rdv, double timeout_s)
{
    char algo[64];
    snprintf(algo, sizeof algo, "comm.algorithm=%s", algorithm);
    const char *sets[] = {algo, "comm.slot_size=4K", "comm.crossover=2K", NULL};
    if (comm_rank_open(r, "shm", sets))
        return -1;
    sy_err err = {{0}};
    if (comm_rank_setup(r, rank, world, rdv, timeout_s, &err)) {
        fprintf(stderr, "rank %d: setup: %s\n", rank, err.msg);
        return -1;
    }
    return 0;
}

static uint64_t fnv(const void *p, size_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
    return h;
}

static void check_allreduce(comm_rank *r, size_t count, unsigned seed)
{
    float *x = malloc((count ? count : 1) * sizeof(float));
    float *want = malloc((count ? count : 1) * sizeof(float));
    for (size_t i = 0; i < count; i++) {
        x[i] = comm_test_value(seed, r->rank, i);
        float acc = comm_test_value(seed, 0, i);
        for (int j = 1; j < r->world; j++)
            acc += comm_test_value(seed, j, i);
        want[i] = acc;
    }
    sy_tensor t = sy_tensor_2d(x, SY_DTYPE_F32, 1, (int64_t)count);
    sy_err err = {{0}};
    int rc = r->ops->allreduce_sum(r->inst, &t, &err);
    if (rc)
        fprintf(stderr, "rank %d: allreduce %zu: %s\n", r->rank, count, err.msg);
    CHECK(rc == SY_OK);
    const int same = count == 0 || memcmp(x, want, count * sizeof(float)) == 0;
    if (!same)
        fprintf(stderr, "rank %d of %d: allreduce of %zu floats differs from the serial rank-order sum\n", r->rank,
                r->world, count);
    CHECK(same);
    /* Bitwise equal across ranks: gather every rank's hash of its result. */
    uint64_t h = fnv(x, count * sizeof(float)), all[16];
    sy_tensor in = sy_tensor_2d(&h, SY_DTYPE_U8, 1, 8), out = sy_tensor_2d(all, SY_DTYPE_U8, r->world, 8);
    CHECK(r->ops->allgather(r->inst, &in, &out, &err) == SY_OK);
    for (int j = 0; j < r->world; j++)
        CHECK(all[j] == h);
    free(x);
    free(want);
}

static void check_allgather(comm_rank *r, size_t cols)
{
    const size_t rows = 2, per = rows * cols;
    float *in = malloc(per * sizeof(float)), *out = calloc(per * (size_t)r->world, sizeof(float));
    for (size_t i = 0; i < per; i++)
        in[i] = comm_test_value(7, r->rank, i);
    sy_tensor ti = sy_tensor_2d(in, SY_DTYPE_F32, (int64_t)rows, (int64_t)cols);
    sy_tensor to = sy_tensor_2d(out, SY_DTYPE_F32, (int64_t)rows * r->world, (int64_t)cols);
    sy_err err = {{0}};
    CHECK(r->ops->allgather(r->inst, &ti, &to, &err) == SY_OK);
    int ok = 1;
    for (int j = 0; j < r->world; j++)
        for (size_t i = 0; i < per; i++)
            ok &= out[(size_t)j * per + i] == comm_test_value(7, j, i);
    if (!ok)
        fprintf(stderr, "rank %d: allgather of %zu floats per rank is wrong\n", r->rank, per);
    CHECK(ok);
    /* A wrong out shape is refused before any rank waits. */
    sy_tensor bad = sy_tensor_2d(out, SY_DTYPE_F32, (int64_t)rows * (r->world + 1), (int64_t)cols);
    CHECK(r->ops->allgather(r->inst, &ti, &bad, &err) == SY_ERR_INVALID);
    free(in);
    free(out);
}

static void check_broadcast(comm_rank *r, size_t bytes, int root)
{
    unsigned char *b = calloc(bytes ? bytes : 1, 1);
    if (r->rank == root)
        for (size_t i = 0; i < bytes; i++)
            b[i] = (unsigned char)(i * 31 + (size_t)root * 7 + 1);
    sy_err err = {{0}};
    CHECK(r->ops->broadcast(r->inst, b, bytes, root, &err) == SY_OK);
    int ok = 1;
    for (size_t i = 0; i < bytes; i++)
        ok &= b[i] == (unsigned char)(i * 31 + (size_t)root * 7 + 1);
    if (!ok)
        fprintf(stderr, "rank %d: broadcast of %zu bytes from %d is wrong\n", r->rank, bytes, root);
    CHECK(ok);
    free(b);
}

static int rank_correctness(int rank, int world, const char *rdv, void *arg)
{
    const case_arg *a = arg;
    comm_rank r;
    sy_test_failures = 0; /* forked: count this rank's checks only */
    if (open_rank(&r, a->algorithm, rank, world, rdv, 30))
        return 1;
    CHECK(r.rank == rank && r.world == world);
    /* 512 floats = 2K = the crossover; 1024 floats = one chunk. */
    static const size_t counts[] = {0, 1, 3, 15, 17, 511, 512, 513, 1023, 1024, 1025, 2047, 2048, 2049, 3071,
                                    4097, 10001};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
        check_allreduce(&r, counts[i], (unsigned)i + 1);
    static const size_t cols[] = {1, 255, 511, 512, 513, 1537};
    for (size_t i = 0; i < sizeof cols / sizeof cols[0]; i++)
        check_allgather(&r, cols[i]);
    const size_t sizes[] = {0, 1, 4095, 4096, 4097, (size_t)SLOT * (size_t)world, (size_t)SLOT * (size_t)world * 2 + 5};
    for (int root = 0; root < world; root++)
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
            check_broadcast(&r, sizes[i], root);
    sy_err err = {{0}};
    for (int i = 0; i < 3; i++) {
        int rc = r.ops->barrier(r.inst, &err);
        if (rc)
            fprintf(stderr, "rank %d: barrier: %s\n", rank, err.msg);
        CHECK(rc == SY_OK);
    }
    /* The algorithm each size takes, as bench-comm shows it. */
    const char *(*algo)(void *, size_t) = (const char *(*)(void *, size_t))r.pi->plugin->desc->get_proc("algorithm");
    CHECK(algo != NULL);
    if (algo && world > 1 && !strcmp(a->algorithm, "auto")) {
        CHECK(!strcmp(algo(r.inst, 2048), "oneshot"));
        CHECK(!strcmp(algo(r.inst, 2052), "twoshot"));
    }
    comm_rank_close(&r);
    return sy_test_failures != 0;
}

/* Rank 0 allreduces 10 floats, rank 1 11: both are told, nobody corrupts memory. */
static int rank_mismatch(int rank, int world, const char *rdv, void *arg)
{
    (void)arg;
    comm_rank r;
    sy_test_failures = 0; /* forked: count this rank's checks only */
    if (open_rank(&r, "auto", rank, world, rdv, 10))
        return 1;
    float x[11] = {0};
    sy_tensor t = sy_tensor_2d(x, SY_DTYPE_F32, 1, rank == 0 ? 10 : 11);
    sy_err err = {{0}};
    CHECK(r.ops->allreduce_sum(r.inst, &t, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "same collectives");
    CHECK(r.ops->barrier(r.inst, &err) == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "broken");
    comm_rank_close(&r);
    return sy_test_failures != 0;
}

/* The last rank dies after one good allreduce; the others must say so, fast. */
static int rank_dies(int rank, int world, const char *rdv, void *arg)
{
    const case_arg *a = arg;
    comm_rank r;
    sy_test_failures = 0; /* forked: count this rank's checks only */
    if (open_rank(&r, a->algorithm, rank, world, rdv, a->timeout_s))
        return 1;
    check_allreduce(&r, 5000, 3);
    if (rank == world - 1)
        raise(SIGKILL);
    float *x = calloc(100000, sizeof(float));
    sy_tensor t = sy_tensor_2d(x, SY_DTYPE_F32, 1, 100000);
    sy_err err = {{0}};
    const double t0 = now_s();
    int rc = r.ops->allreduce_sum(r.inst, &t, &err);
    const double took = now_s() - t0;
    printf("rank %d after a peer died (%.3f s): %s\n", rank, took, err.msg);
    CHECK(rc == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "died");
    char who[64];
    snprintf(who, sizeof who, "rank %d (pid ", world - 1);
    CHECK_CONTAINS(err.msg, who);
    CHECK(took < a->timeout_s / 2); /* the pid check, not the timeout */
    CHECK(r.ops->barrier(r.inst, &err) == SY_ERR_UNAVAILABLE);
    free(x);
    comm_rank_close(&r);
    return sy_test_failures != 0;
}

/* Rank 1 is alive but never comes: rank 0 times out with the reason. */
static int rank_stuck(int rank, int world, const char *rdv, void *arg)
{
    const case_arg *a = arg;
    comm_rank r;
    sy_test_failures = 0; /* forked: count this rank's checks only */
    if (open_rank(&r, "auto", rank, world, rdv, a->timeout_s))
        return 1;
    sy_err err = {{0}};
    if (rank == 1) {
        sleep(3);
        comm_rank_close(&r);
        return 0;
    }
    const double t0 = now_s();
    int rc = r.ops->barrier(r.inst, &err);
    const double took = now_s() - t0;
    printf("rank 0 with a stuck peer (%.3f s): %s\n", took, err.msg);
    CHECK(rc == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "timed out");
    CHECK_CONTAINS(err.msg, "waiting for rank 1 (pid");
    CHECK(took >= a->timeout_s * 0.9 && took < a->timeout_s + 2);
    comm_rank_close(&r);
    return sy_test_failures != 0;
}

/* Rank 1 destroys its instance while rank 0 waits in a barrier. */
static int rank_leaves(int rank, int world, const char *rdv, void *arg)
{
    (void)arg;
    comm_rank r;
    sy_test_failures = 0; /* forked: count this rank's checks only */
    if (open_rank(&r, "auto", rank, world, rdv, 20))
        return 1;
    sy_err err = {{0}};
    if (rank == 0) {
        CHECK(r.ops->barrier(r.inst, &err) == SY_ERR_UNAVAILABLE);
        CHECK(strstr(err.msg, "left the group") || strstr(err.msg, "died"));
    }
    comm_rank_close(&r);
    return sy_test_failures != 0;
}

/* Rank 0 never creates the segment: rank 1's setup times out naming it. */
static int rank_no_creator(int rank, int world, const char *rdv, void *arg)
{
    (void)world;
    (void)arg;
    if (rank == 0)
        return 0;
    sy_test_failures = 0;
    comm_rank r;
    if (comm_rank_open(&r, "shm", NULL))
        return 1;
    sy_err err = {{0}};
    CHECK(comm_rank_setup(&r, 1, 2, rdv, 0.3, &err) == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "waiting for rank 0 to create");
    CHECK(r.ops->barrier(r.inst, &err) == SY_ERR_INVALID); /* no group: "before setup" */
    CHECK_CONTAINS(err.msg, "before setup");
    comm_rank_close(&r);
    return sy_test_failures != 0;
}

static void test_local(void)
{
    comm_rank r;
    CHECK(comm_rank_open(&r, "local", NULL) == 0);
    if (!r.ops)
        return;
    sy_err err = {{0}};
    CHECK(comm_rank_setup(&r, 0, 1, "x", 1, &err) == SY_OK);
    CHECK(comm_rank_setup(&r, 0, 2, "x", 1, &err) == SY_ERR_UNSUPPORTED);
    CHECK_CONTAINS(err.msg, "world_size 1");
    comm_rank_close(&r);
}

static void test_bad_setup(void)
{
    comm_rank r;
    CHECK(comm_rank_open(&r, "shm", NULL) == 0);
    if (!r.ops)
        return;
    sy_err err = {{0}};
    CHECK(comm_rank_setup(&r, 2, 2, "x", 1, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "rank 2 is not in 0..1");
    CHECK(comm_rank_setup(&r, 0, 2, "", 1, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "rendezvous");
    comm_rank_close(&r);
}

/*
 * --mpi: this process is one rank under mpirun (tests/comm/test_comm_mpi.sh);
 * rank and size come from MPI (setup with -1, -1). With two ranks a + b is
 * the serial sum whatever MPI's reduction order, so the bitwise checks hold.
 */
static int run_mpi(void)
{
    comm_rank r;
    if (comm_rank_open(&r, "mpi", NULL))
        return 1;
    sy_err err = {{0}};
    int rc = comm_rank_setup(&r, -1, -1, "", 30, &err);
    if (rc)
        fprintf(stderr, "mpi setup: %s\n", err.msg);
    CHECK(rc == SY_OK);
    if (rc == SY_OK) {
        CHECK(r.world == 2);
        static const size_t counts[] = {0, 1, 17, 1023, 100003};
        for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++)
            check_allreduce(&r, counts[i], (unsigned)i + 1);
        check_allgather(&r, 1);
        check_allgather(&r, 1537);
        for (int root = 0; root < r.world; root++) {
            check_broadcast(&r, 1, root);
            check_broadcast(&r, 100001, root);
        }
        CHECK(r.ops->barrier(r.inst, &err) == SY_OK);
        CHECK(r.ops->broadcast(r.inst, &rc, sizeof rc, 5, &err) == SY_ERR_INVALID);
        printf("mpi rank %d of %d: %d checks\n", r.rank, r.world, sy_test_checks);
    }
    comm_rank_close(&r);
    return sy_test_done("test_comm_shm --mpi");
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--mpi"))
        return run_mpi();
    static const char *const algos[] = {"oneshot", "twoshot", "auto"};
    char tag[64];
    for (int world = 2; world <= 3; world++)
        for (int a = 0; a < 3; a++) {
            case_arg arg = {algos[a], 30};
            snprintf(tag, sizeof tag, "ok-%d-%s", world, algos[a]);
            int failed = comm_run_ranks(tag, world, rank_correctness, &arg);
            if (failed)
                fprintf(stderr, "correctness, %d ranks, %s: %d ranks failed\n", world, algos[a], failed);
            CHECK(failed == 0);
        }
    /* One rank alone works too (every collective is local). */
    case_arg one = {"auto", 10};
    CHECK(comm_run_ranks("ok-1", 1, rank_correctness, &one) == 0);
    CHECK(comm_run_ranks("mismatch", 2, rank_mismatch, NULL) == 0);
    for (int a = 0; a < 2; a++) {
        case_arg arg = {algos[a], 20};
        snprintf(tag, sizeof tag, "dies-%s", algos[a]);
        /* The dead rank itself counts as failed: "rank 2 of 3 failed (signal 9)" is expected. */
        CHECK(comm_run_ranks(tag, 3, rank_dies, &arg) == 1);
    }
    case_arg stuck = {"auto", 1.0};
    CHECK(comm_run_ranks("stuck", 2, rank_stuck, &stuck) == 0);
    CHECK(comm_run_ranks("leaves", 2, rank_leaves, NULL) == 0);
    CHECK(comm_run_ranks("nocreator", 2, rank_no_creator, NULL) == 0);
    test_local();
    test_bad_setup();
    return sy_test_done("test_comm_shm");
}
