/*
 * comm/tcp across forked ranks on 127.0.0.1, worlds 2, 3 and 4: allreduce
 * at sizes on both sides of the crossover (and odd ones that do not split
 * evenly) is bitwise equal on every rank to the serial rank-order sum;
 * allgather, broadcast from a non-zero root and barrier; a rank that dies
 * makes the others fail naming it within the timeout; a rank that claims
 * another world size is refused; nobody at the rendezvous is a clear error.
 *
 * The test holds the rendezvous socket itself (bound to port 0, so no port
 * is guessed) and hands it to rank 0 as ";fd=N", the way the launcher does.
 */
#include "config.h"

#include "../unit/test_check.h"
#include "comm_harness.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* A listening socket on 127.0.0.1 with a port the kernel picked. */
static int listen_free(int *port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) || listen(fd, 64) ||
        getsockname(fd, (struct sockaddr *)&a, &len)) {
        perror("comm tcp test: listen");
        exit(1);
    }
    *port = ntohs(a.sin_port);
    return fd;
}

typedef int (*rank_fn)(comm_rank *r, int rank, int world, void *arg);

typedef struct group {
    int world;
    double timeout_s;
    int claim_world_of_last; /* > 0: the last rank says this world size instead */
    const char *sets[3];
} group;

/* Forks the ranks; rank 0 gets the listening socket. Returns how many ranks exited non-zero; st[] their statuses. */
static int run_group(const group *g, rank_fn fn, void *arg, int *st)
{
    int port;
    int lfd = listen_free(&port);
    pid_t pids[8];
    fflush(stdout);
    fflush(stderr);
    for (int r = 0; r < g->world; r++) {
        pids[r] = fork();
        if (pids[r] == 0) {
            char rdv[128];
            if (r == 0)
                snprintf(rdv, sizeof rdv, "127.0.0.1:%d/t%ld;fd=%d", port, (long)getppid(), lfd);
            else
                snprintf(rdv, sizeof rdv, "127.0.0.1:%d/t%ld", port, (long)getppid());
            if (r != 0)
                close(lfd);
            comm_rank cr;
            int status = 1;
            if (comm_rank_open(&cr, "tcp", g->sets) == 0) {
                sy_err err = {{0}};
                const int world = r == g->world - 1 && g->claim_world_of_last > 0 ? g->claim_world_of_last : g->world;
                if (comm_rank_setup(&cr, r, world, rdv, g->timeout_s, &err) == 0)
                    status = fn(&cr, r, g->world, arg);
                else {
                    fprintf(stderr, "rank %d: setup: %s\n", r, err.msg);
                    status = 3;
                }
                comm_rank_close(&cr);
            }
            fflush(stdout);
            fflush(stderr);
            _exit(status);
        }
    }
    close(lfd);
    int failed = 0;
    for (int r = 0; r < g->world; r++) {
        int ws = 0;
        waitpid(pids[r], &ws, 0);
        st[r] = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
        failed += st[r] != 0;
    }
    return failed;
}

static const size_t sizes[] = {0, 1, 7, 1000, 16384, 16385, 100003};

/* Every collective's result against what a serial program computes. */
static int correct_rank(comm_rank *r, int rank, int world, void *arg)
{
    (void)arg;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const size_t n = sizes[k];
        float *x = malloc((n + 1) * sizeof(float)), *want = malloc((n + 1) * sizeof(float));
        for (size_t i = 0; i < n; i++) {
            x[i] = comm_test_value((unsigned)k, rank, i);
            want[i] = comm_test_value((unsigned)k, 0, i);
            for (int q = 1; q < world; q++)
                want[i] += comm_test_value((unsigned)k, q, i);
        }
        sy_tensor t = {.data = x, .dtype = SY_DTYPE_F32, .ndim = 1, .shape = {(int64_t)n}, .stride = {1}};
        sy_err err = {{0}};
        int rc = r->ops->allreduce_sum(r->inst, &t, &err);
        if (rc)
            fprintf(stderr, "rank %d: allreduce of %zu: %s\n", rank, n, err.msg);
        CHECK(rc == SY_OK);
        CHECK(n == 0 || memcmp(x, want, n * sizeof(float)) == 0);
        free(x);
        free(want);
    }
    enum { ROWS = 3, COLS = 5 };
    float in[ROWS * COLS], out[8 * ROWS * COLS];
    for (int i = 0; i < ROWS * COLS; i++)
        in[i] = (float)(rank * 100 + i);
    sy_tensor ti = {.data = in, .dtype = SY_DTYPE_F32, .ndim = 2, .shape = {ROWS, COLS}, .stride = {COLS, 1}};
    sy_tensor to = {.data = out, .dtype = SY_DTYPE_F32, .ndim = 2, .shape = {ROWS * world, COLS}, .stride = {COLS, 1}};
    sy_err err = {{0}};
    CHECK(r->ops->allgather(r->inst, &ti, &to, &err) == SY_OK);
    for (int q = 0; q < world; q++)
        for (int i = 0; i < ROWS * COLS; i++)
            CHECK(out[q * ROWS * COLS + i] == (float)(q * 100 + i));
    char buf[300000];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = rank == 1 ? (char)(i * 7) : 0;
    CHECK(r->ops->broadcast(r->inst, buf, sizeof buf, 1, &err) == SY_OK);
    int same = 1;
    for (size_t i = 0; i < sizeof buf; i++)
        same &= buf[i] == (char)(i * 7);
    CHECK(same);
    CHECK(r->ops->barrier(r->inst, &err) == SY_OK);
    return sy_test_failures ? 1 : 0;
}

/* The last rank leaves after one allreduce; the others' next one must fail naming it, in time. */
static int dying_rank(comm_rank *r, int rank, int world, void *arg)
{
    (void)arg;
    float x[64] = {0};
    sy_tensor t = {.data = x, .dtype = SY_DTYPE_F32, .ndim = 1, .shape = {64}, .stride = {1}};
    sy_err err = {{0}};
    if (r->ops->allreduce_sum(r->inst, &t, &err))
        return 1;
    if (rank == world - 1)
        _exit(0); /* gone without a word, like a killed node */
    const double t0 = now_s();
    int rc = r->ops->allreduce_sum(r->inst, &t, &err);
    const double took = now_s() - t0;
    char who[32];
    snprintf(who, sizeof who, "rank %d (127.0.0.1:", world - 1);
    CHECK(rc == SY_ERR_UNAVAILABLE);
    /* A rank that was exchanging with the dead one names it; one that heard the news first from a peer that
     * gave up may name that peer instead, which also ends the group. */
    if (rank == 0)
        CHECK_CONTAINS(err.msg, who);
    CHECK_CONTAINS(err.msg, "gives up allreduce_sum");
    CHECK(took < 5.0);
    CHECK(r->ops->barrier(r->inst, &err) == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "broke earlier");
    return sy_test_failures ? 1 : 0;
}

static int never_called(comm_rank *r, int rank, int world, void *arg)
{
    (void)r;
    (void)rank;
    (void)world;
    (void)arg;
    return 9; /* setup was expected to fail */
}

int main(void)
{
    int st[8];
    for (int world = 2; world <= 4; world++) {
        group g = {.world = world, .timeout_s = 20, .sets = {NULL}};
        CHECK(run_group(&g, correct_rank, NULL, st) == 0);
        group small = {.world = world, .timeout_s = 20, .sets = {"comm.crossover=0", NULL}};
        CHECK(run_group(&small, correct_rank, NULL, st) == 0);
    }
    group d = {.world = 3, .timeout_s = 20, .sets = {NULL}};
    run_group(&d, dying_rank, NULL, st);
    CHECK(st[0] == 0 && st[1] == 0 && st[2] == 0);

    /* The last rank says the world is 3; rank 0 refuses the group. */
    group w = {.world = 2, .timeout_s = 5, .claim_world_of_last = 3, .sets = {NULL}};
    run_group(&w, never_called, NULL, st);
    CHECK(st[0] == 3 && st[1] == 3);

    /* Nobody at the rendezvous: a bounded wait and a message naming the address. */
    comm_rank cr;
    CHECK(comm_rank_open(&cr, "tcp", NULL) == 0);
    int port;
    int lfd = listen_free(&port);
    close(lfd); /* now nothing listens there */
    char rdv[64];
    snprintf(rdv, sizeof rdv, "127.0.0.1:%d", port);
    sy_err err = {{0}};
    const double t0 = now_s();
    CHECK(comm_rank_setup(&cr, 1, 2, rdv, 0.5, &err) == SY_ERR_UNAVAILABLE);
    CHECK(now_s() - t0 < 5.0);
    CHECK_CONTAINS(err.msg, "found nobody at 127.0.0.1:");
    comm_rank_close(&cr);
    CHECK(comm_rank_open(&cr, "tcp", NULL) == 0);
    CHECK(comm_rank_setup(&cr, 0, 2, "no-port-here", 1, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "expected HOST:PORT");
    comm_rank_close(&cr);
    /* A group of one meets nobody, so any rendezvous string will do (plugin-check passes a plain name). */
    CHECK(comm_rank_open(&cr, "tcp", NULL) == 0);
    CHECK(comm_rank_setup(&cr, 0, 1, "plugin-check-1", 1, &err) == SY_OK);
    float one[3] = {1.5f, -2, 3};
    sy_tensor t1 = {.data = one, .dtype = SY_DTYPE_F32, .ndim = 1, .shape = {3}, .stride = {1}};
    CHECK(cr.ops->allreduce_sum(cr.inst, &t1, &err) == SY_OK && one[0] == 1.5f && one[1] == -2 && one[2] == 3);
    comm_rank_close(&cr);
    return sy_test_done("test_comm_tcp");
}
