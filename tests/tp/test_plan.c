/*
 * The step-plan wire format and its socket transport: a batch, a block
 * copy, an MTP step (with chained hidden rows), a heartbeat and a shutdown arrive exactly as sent, in order; a
 * corrupt or truncated plan is refused with what was wrong; a follower
 * whose rank 0 is gone, or silent past the timeout, gets an error saying so.
 */
#include "config.h"

#include "dist/plan.h"
#include "../unit/test_check.h"

#include <stdlib.h>
#include <string.h>
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

/* An MTP step: a first step on the target's rows and a chained one that brings the previous step's hidden rows;
 * every field arrives, the hidden rows bit for bit, and the wanted outputs say only whether they are wanted. */
static void test_mtp_round_trip(void)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    sy_plan_chan tx = leader_chan(sv[0]), rx = follower_chan(sv[1], 2);
    sy_plan out = {0}, in = {0};
    sy_err err = {{0}};
    enum { H = 3 };
    in.hidden_width = H;

    const int32_t t0[] = {11, 12, 13}, b0[] = {2, 6}, t1[] = {21, 22}, b1[] = {9};
    const float h1[2 * H] = {0.5f, -1.25f, 3e-8f, 1e30f, -0.0f, 7.0f};
    float hid_out[3 * H], logits[8];
    int32_t picks[3];
    const sy_mtp_seq seqs[2] = {
        {.tokens = t0, .n = 3, .pos0 = 17, .blocks = b0, .n_blocks = 2, .target_row = 4, .n_out = 3,
         .hidden_out = hid_out, .greedy_id = picks},
        {.tokens = t1, .n = 2, .pos0 = 5, .blocks = b1, .n_blocks = 1, .target_row = -1, .hidden = h1, .n_out = 0,
         .logits = logits},
    };
    CHECK(sy_plan_encode_mtp(&out, seqs, 2, H, &err) == SY_OK);
    CHECK(sy_plan_send(&tx, &out, &err) == SY_OK);
    CHECK(sy_plan_recv(&rx, &in, &err) == SY_OK);
    CHECK(in.hdr.kind == SY_PLAN_MTP && in.hdr.n_seqs == 2 && in.hdr.seq == 1);
    const sy_mtp_seq *a = &in.mseqs[0], *b = &in.mseqs[1];
    CHECK(a->n == 3 && a->tokens[0] == 11 && a->tokens[2] == 13 && a->pos0 == 17 && a->n_blocks == 2 &&
          a->blocks[0] == 2 && a->blocks[1] == 6 && a->target_row == 4 && a->n_out == 3);
    CHECK(a->hidden == NULL && a->hidden_out != NULL && a->greedy_id != NULL && a->logits == NULL);
    CHECK(b->n == 2 && b->tokens[1] == 22 && b->pos0 == 5 && b->n_blocks == 1 && b->blocks[0] == 9 &&
          b->target_row == -1 && b->n_out == 0);
    CHECK(b->hidden != NULL && memcmp(b->hidden, h1, sizeof h1) == 0);
    CHECK(b->hidden_out == NULL && b->greedy_id == NULL && b->logits != NULL);
    close(sv[0]);
    close(sv[1]);
    sy_plan_free(&out);
    sy_plan_free(&in);
}

/* A cut-off or inconsistent MTP plan is refused before a follower reads past it. */
static void test_mtp_corrupt(void)
{
    sy_plan p = {0};
    sy_err err = {{0}};
    enum { H = 4 };
    const int32_t t[] = {5, 6}, b[] = {1};
    const float h[2 * H] = {1, 2, 3, 4, 5, 6, 7, 8};
    const sy_mtp_seq s = {.tokens = t, .n = 2, .blocks = b, .n_blocks = 1, .target_row = -1, .hidden = h,
                          .n_out = 1, .greedy_id = p.greedy_sink};
    CHECK(sy_plan_encode_mtp(&p, &s, 1, H, &err) == SY_OK);
    p.hidden_width = H;
    CHECK(sy_plan_decode(&p, &err) == SY_OK);
    const uint64_t whole = p.hdr.payload_bytes;

    p.hdr.payload_bytes = whole - sizeof(int32_t); /* the last hidden float cut off */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "past the end");
    p.hdr.payload_bytes = 5 * sizeof(int32_t); /* inside the fixed words */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "MTP step of 1 sequences in 5 words");
    p.hdr.payload_bytes = whole;

    p.hidden_width = H + 1; /* another model's width: the rows would be read past their end */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "hidden floats");
    CHECK_CONTAINS(err.msg, "expected 0 or 2 x 5");
    p.hidden_width = H;

    p.payload[6] = 2 * H - 1; /* fewer floats than its rows: one word left over, and short rows */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "expected 0 or 2 x 4");
    p.payload[6] = 2 * H;

    p.payload[3] = 0; /* target rows and host rows at once */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "target_row 0");
    p.payload[3] = -1;

    p.payload[5] = 8; /* an output nobody defined */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "wants 8");
    p.payload[5] = 2;

    p.payload[0] = -1;
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "past the end");
    p.payload[0] = 2;

    p.hdr.n_seqs = 2; /* a second sequence the payload does not hold */
    CHECK(sy_plan_decode(&p, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "MTP sequence 1 is cut off");
    p.hdr.n_seqs = 1;
    CHECK(sy_plan_decode(&p, &err) == SY_OK);
    sy_plan_free(&p);
}

int main(void)
{
    test_round_trip();
    test_follower_gone_and_timeout();
    test_corrupt();
    test_mtp_round_trip();
    test_mtp_corrupt();
    return sy_test_done("test_plan");
}
