/*
 * The step-plan wire format and its socket transport: a batch, a block
 * copy, a heartbeat and a shutdown arrive exactly as sent, in order; a
 * corrupt or truncated plan is refused with what was wrong; a follower
 * whose rank 0 is gone, or silent past the timeout, gets an error saying so.
 */
#include "config.h"

#include "dist/plan.h"
#include "../unit/test_check.h"

#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

static sy_plan_chan leader_chan(int fd)
{
    sy_plan_chan c = {.rank = 0, .world = 2, .sockets = true, .timeout_s = 1};
    c.fds[0] = -1;
    c.fds[1] = fd;
    return c;
}

static sy_plan_chan follower_chan(int fd, double timeout_s)
{
    sy_plan_chan c = {.rank = 1, .world = 2, .sockets = true, .timeout_s = timeout_s};
    c.fds[0] = fd;
    return c;
}

static void test_round_trip(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    sy_plan_chan tx = leader_chan(sv[0]), rx = follower_chan(sv[1], 2);
    sy_plan out = {0}, in = {0};
    sy_err err = {{0}};

    const int32_t t0[] = {1, 403, 407}, b0[] = {7}, t1[] = {99}, b1[] = {3, 4, 5};
    const sy_step_seq seqs[2] = {
        {.tokens = t0, .n_tokens = 3, .ctx_len = 0, .blocks = b0, .n_blocks = 1, .want_logits = true},
        {.tokens = t1, .n_tokens = 1, .ctx_len = 40, .blocks = b1, .n_blocks = 3, .want_logits = false},
    };
    CHECK(sy_plan_encode_step(&out, seqs, 2, &err) == SY_OK);
    CHECK(sy_plan_send(&tx, &out, &err) == SY_OK);
    const int32_t src[] = {1, 2}, dst[] = {8, 9};
    CHECK(sy_plan_encode_copy(&out, src, dst, 2, &err) == SY_OK);
    CHECK(sy_plan_send(&tx, &out, &err) == SY_OK);
    sy_plan_encode_empty(&out, SY_PLAN_HEARTBEAT);
    CHECK(sy_plan_send(&tx, &out, &err) == SY_OK);
    sy_plan_encode_empty(&out, SY_PLAN_SHUTDOWN);
    CHECK(sy_plan_send(&tx, &out, &err) == SY_OK);

    CHECK(sy_plan_recv(&rx, &in, &err) == SY_OK);
    CHECK(in.hdr.kind == SY_PLAN_STEP && in.hdr.n_seqs == 2 && in.hdr.seq == 1);
    CHECK(in.seqs[0].n_tokens == 3 && in.seqs[0].tokens[2] == 407 && in.seqs[0].blocks[0] == 7 &&
          in.seqs[0].want_logits);
    CHECK(in.seqs[1].n_tokens == 1 && in.seqs[1].ctx_len == 40 && in.seqs[1].n_blocks == 3 &&
          in.seqs[1].blocks[2] == 5 && !in.seqs[1].want_logits);
    CHECK(sy_plan_recv(&rx, &in, &err) == SY_OK);
    CHECK(in.hdr.kind == SY_PLAN_COPY && in.hdr.n_pairs == 2 && in.src[1] == 2 && in.dst[0] == 8);
    CHECK(sy_plan_recv(&rx, &in, &err) == SY_OK && in.hdr.kind == SY_PLAN_HEARTBEAT);
    CHECK(sy_plan_recv(&rx, &in, &err) == SY_OK && in.hdr.kind == SY_PLAN_SHUTDOWN && in.hdr.seq == 4);

    /* Rank 0 gone: end of file, named. */
    close(sv[0]);
    CHECK(sy_plan_recv(&rx, &in, &err) == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "rank 0 closed the step-plan channel");
    close(sv[1]);
    sy_plan_free(&out);
    sy_plan_free(&in);
}

static void test_follower_gone_and_timeout(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    sy_plan_chan tx = leader_chan(sv[0]), rx = follower_chan(sv[1], 0.2);
    sy_plan p = {0};
    sy_err err = {{0}};
    /* Nothing sent: the follower gives up at its timeout. */
    CHECK(sy_plan_recv(&rx, &p, &err) == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "no step plan or heartbeat from rank 0");
    /* The follower's end closed: rank 0's send fails naming rank 1 (no SIGPIPE). */
    close(sv[1]);
    sy_plan_encode_empty(&p, SY_PLAN_HEARTBEAT);
    CHECK(sy_plan_send(&tx, &p, &err) == SY_ERR_UNAVAILABLE);
    CHECK_CONTAINS(err.msg, "rank 1 is gone");
    close(sv[0]);
    sy_plan_free(&p);
}

static void test_corrupt(void)
{
    sy_plan p = {0};
    sy_err err = {{0}};
    const int32_t t[] = {5, 6}, b[] = {1};
    const sy_step_seq s = {.tokens = t, .n_tokens = 2, .blocks = b, .n_blocks = 1, .want_logits = true};
    CHECK(sy_plan_encode_step(&p, &s, 1, &err) == SY_OK);
    CHECK(sy_plan_decode(&p, &err) == SY_OK);
    p.payload[0] = 1000; /* more tokens than the payload holds */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "past the end");
    p.payload[0] = 1; /* one word left over */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "left over");
    p.hdr.magic = 0x12345678;
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "magic");
    sy_plan_encode_empty(&p, 9);
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "unknown kind 9");
    p.hdr.payload_bytes = 3;
    CHECK(sy_plan_reserve(&p, &err) == SY_ERR_INVALID);
    sy_plan_free(&p);
}

int main(void)
{
    test_round_trip();
    test_follower_gone_and_timeout();
    test_corrupt();
    return sy_test_done("test_plan");
}
