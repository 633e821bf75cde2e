#include "config.h"

#include "dist/plan.h"
#include "dist/sockio.h"
#include "util/util.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* "SYP2": the want_logits word may say 2 (greedy pick only); a rank of the
 * first format ("SYPP") would read it as a full logits row and make a
 * different collective, so the two refuse each other. */
#define PLAN_MAGIC 0x53595032u

_Static_assert(sizeof(sy_plan_hdr) == 32, "the plan header is 32 bytes on the wire");

static int grow(sy_plan *p, size_t bytes, int32_t n_seqs, sy_err *err)
{
    if (bytes > p->cap) {
        int32_t *np = realloc(p->payload, bytes);
        if (!np)
            return sy_err_set(err, SY_ERR_NOMEM, "step plan: cannot allocate %zu bytes", bytes);
        p->payload = np;
        p->cap = bytes;
    }
    if (n_seqs > p->cap_seqs) {
        sy_step_seq *ns = realloc(p->seqs, sizeof *ns * (size_t)n_seqs);
        if (!ns)
            return sy_err_set(err, SY_ERR_NOMEM, "step plan: cannot allocate %d sequences", n_seqs);
        p->seqs = ns;
        p->cap_seqs = n_seqs;
    }
    return SY_OK;
}

int sy_plan_encode_step(sy_plan *p, const sy_step_seq *seqs, int32_t n_seqs, sy_err *err)
{
    size_t words = 0;
    for (int32_t s = 0; s < n_seqs; s++)
        words += 4 + (size_t)(seqs[s].n_tokens > 0 ? seqs[s].n_tokens : 0) +
                 (size_t)(seqs[s].n_blocks > 0 ? seqs[s].n_blocks : 0);
    int rc = grow(p, words * sizeof(int32_t), 0, err);
    if (rc)
        return rc;
    int32_t *w = p->payload;
    for (int32_t s = 0; s < n_seqs; s++) {
        const sy_step_seq *q = &seqs[s];
        const int32_t nt = q->n_tokens > 0 ? q->n_tokens : 0, nb = q->n_blocks > 0 ? q->n_blocks : 0;
        *w++ = nt;
        *w++ = q->ctx_len;
        *w++ = nb;
        const int32_t m = q->n_logits > 1 ? q->n_logits : 0;
        *w++ = (!q->want_logits && !m ? 0 : q->greedy_id ? 2 : 1) | m << 2;
        if (nt)
            memcpy(w, q->tokens, sizeof(int32_t) * (size_t)nt);
        w += nt;
        if (nb)
            memcpy(w, q->blocks, sizeof(int32_t) * (size_t)nb);
        w += nb;
    }
    p->hdr = (sy_plan_hdr){.magic = PLAN_MAGIC, .kind = SY_PLAN_STEP, .n_seqs = n_seqs,
                           .payload_bytes = words * sizeof(int32_t)};
    return SY_OK;
}

enum { MTP_WORDS = 7, MTP_HIDDEN_OUT = 1, MTP_GREEDY = 2, MTP_LOGITS = 4 };

int sy_plan_encode_mtp(sy_plan *p, const sy_mtp_seq *seqs, int32_t n_seqs, int32_t hidden, sy_err *err)
{
    size_t words = 0;
    for (int32_t s = 0; s < n_seqs; s++) {
        const sy_mtp_seq *q = &seqs[s];
        words += MTP_WORDS + (size_t)(q->n > 0 ? q->n : 0) + (size_t)(q->n_blocks > 0 ? q->n_blocks : 0) +
                 (q->target_row < 0 && q->hidden ? (size_t)(q->n > 0 ? q->n : 0) * (size_t)hidden : 0);
    }
    int rc = grow(p, words * sizeof(int32_t), 0, err);
    if (rc)
        return rc;
    int32_t *w = p->payload;
    for (int32_t s = 0; s < n_seqs; s++) {
        const sy_mtp_seq *q = &seqs[s];
        const int32_t n = q->n > 0 ? q->n : 0, nb = q->n_blocks > 0 ? q->n_blocks : 0;
        const int32_t nh = q->target_row < 0 && q->hidden ? n * hidden : 0;
        *w++ = n;
        *w++ = q->pos0;
        *w++ = nb;
        *w++ = q->target_row;
        *w++ = q->n_out;
        *w++ = (q->hidden_out ? MTP_HIDDEN_OUT : 0) | (q->greedy_id ? MTP_GREEDY : 0) | (q->logits ? MTP_LOGITS : 0);
        *w++ = nh;
        if (n)
            memcpy(w, q->tokens, sizeof(int32_t) * (size_t)n);
        w += n;
        if (nb)
            memcpy(w, q->blocks, sizeof(int32_t) * (size_t)nb);
        w += nb;
        if (nh)
            memcpy(w, q->hidden, sizeof(float) * (size_t)nh);
        w += nh;
    }
    p->hdr = (sy_plan_hdr){.magic = PLAN_MAGIC, .kind = SY_PLAN_MTP, .n_seqs = n_seqs,
                           .payload_bytes = words * sizeof(int32_t)};
    return SY_OK;
}

static int decode_mtp(sy_plan *p, size_t words, sy_err *err)
{
    const sy_plan_hdr *h = &p->hdr;
    if (h->n_seqs < 0 || (size_t)h->n_seqs * MTP_WORDS > words)
        return sy_err_set(err, SY_ERR_INVALID, "step plan: MTP step of %d sequences in %zu words", h->n_seqs, words);
    if (h->n_seqs > p->cap_mseqs) {
        sy_mtp_seq *ns = realloc(p->mseqs, sizeof *ns * (size_t)h->n_seqs);
        if (!ns)
            return sy_err_set(err, SY_ERR_NOMEM, "step plan: cannot allocate %d MTP sequences", h->n_seqs);
        p->mseqs = ns;
        p->cap_mseqs = h->n_seqs;
    }
    size_t at = 0;
    for (int32_t s = 0; s < h->n_seqs; s++) {
        if (words - at < MTP_WORDS)
            return sy_err_set(err, SY_ERR_INVALID, "step plan: MTP sequence %d is cut off at word %zu", s, at);
        const int32_t *w = p->payload + at;
        if (w[0] < 0 || w[2] < 0 || w[6] < 0 || (size_t)w[0] + (size_t)w[2] + (size_t)w[6] > words - at - MTP_WORDS)
            return sy_err_set(err, SY_ERR_INVALID, "step plan: MTP sequence %d claims %d tokens, %d blocks and %d "
                              "hidden floats, past the end of %zu words", s, w[0], w[2], w[6], words);
        const int32_t want = w[5];
        if (w[6] && ((int64_t)w[0] * p->hidden_width != w[6] || w[3] >= 0))
            return sy_err_set(err, SY_ERR_INVALID, "step plan: MTP sequence %d brings %d hidden floats with "
                              "target_row %d, expected 0 or %d x %d (its rows x this rank's hidden width) with "
                              "target_row < 0", s, w[6], w[3], w[0], p->hidden_width);
        if (want & ~(MTP_HIDDEN_OUT | MTP_GREEDY | MTP_LOGITS))
            return sy_err_set(err, SY_ERR_INVALID, "step plan: MTP sequence %d wants %d, expected a sum of 1 "
                              "(hidden rows), 2 (greedy picks) and 4 (logits)", s, want);
        p->mseqs[s] = (sy_mtp_seq){.tokens = w + MTP_WORDS,
                                   .n = w[0],
                                   .pos0 = w[1],
                                   .blocks = w + MTP_WORDS + w[0],
                                   .n_blocks = w[2],
                                   .target_row = w[3],
                                   .hidden = w[6] ? (const float *)(const void *)(w + MTP_WORDS + w[0] + w[2]) : NULL,
                                   .n_out = w[4],
                                   .hidden_out = want & MTP_HIDDEN_OUT ? p->float_sink : NULL,
                                   .greedy_id = want & MTP_GREEDY ? p->greedy_sink : NULL,
                                   .logits = want & MTP_LOGITS ? p->float_sink : NULL};
        at += MTP_WORDS + (size_t)w[0] + (size_t)w[2] + (size_t)w[6];
    }
    if (at != words)
        return sy_err_set(err, SY_ERR_INVALID, "step plan: %zu words left over after %d MTP sequences", words - at,
                          h->n_seqs);
    return SY_OK;
}

int sy_plan_encode_copy(sy_plan *p, const int32_t *src, const int32_t *dst, int32_t n, sy_err *err)
{
    const size_t bytes = sizeof(int32_t) * 2 * (size_t)n;
    int rc = grow(p, bytes, 0, err);
    if (rc)
        return rc;
    if (n) {
        memcpy(p->payload, src, sizeof(int32_t) * (size_t)n);
        memcpy(p->payload + n, dst, sizeof(int32_t) * (size_t)n);
    }
    p->hdr = (sy_plan_hdr){.magic = PLAN_MAGIC, .kind = SY_PLAN_COPY, .n_pairs = n, .payload_bytes = bytes};
    return SY_OK;
}

void sy_plan_encode_empty(sy_plan *p, uint32_t kind)
{
    p->hdr = (sy_plan_hdr){.magic = PLAN_MAGIC, .kind = kind};
}

int sy_plan_reserve(sy_plan *p, sy_err *err)
{
    /* Bounds a corrupt header before it turns into a huge allocation. */
    if (p->hdr.payload_bytes > (1ull << 30) || p->hdr.payload_bytes % sizeof(int32_t))
        return sy_err_set(err, SY_ERR_INVALID, "step plan: payload of %llu bytes, expected a multiple of 4 up to 1G",
                          (unsigned long long)p->hdr.payload_bytes);
    return grow(p, (size_t)p->hdr.payload_bytes, 0, err);
}

int sy_plan_decode(sy_plan *p, sy_err *err)
{
    const sy_plan_hdr *h = &p->hdr;
    if (h->magic != PLAN_MAGIC)
        return sy_err_set(err, SY_ERR_INVALID, "step plan: header magic 0x%08x, expected 0x%08x", h->magic,
                          PLAN_MAGIC);
    const size_t words = (size_t)h->payload_bytes / sizeof(int32_t);
    switch (h->kind) {
    case SY_PLAN_HEARTBEAT:
    case SY_PLAN_SHUTDOWN:
        return SY_OK;
    case SY_PLAN_COPY:
        if (h->n_pairs < 0 || (size_t)h->n_pairs * 2 != words)
            return sy_err_set(err, SY_ERR_INVALID, "step plan: COPY of %d pairs in %zu words", h->n_pairs, words);
        p->src = p->payload;
        p->dst = p->payload + h->n_pairs;
        return SY_OK;
    case SY_PLAN_MTP:
        return decode_mtp(p, words, err);
    case SY_PLAN_STEP:
        break;
    default:
        return sy_err_set(err, SY_ERR_INVALID, "step plan: unknown kind %u, expected 1..5", h->kind);
    }
    if (h->n_seqs < 0 || (size_t)h->n_seqs * 4 > words)
        return sy_err_set(err, SY_ERR_INVALID, "step plan: %d sequences in %zu words", h->n_seqs, words);
    int rc = grow(p, 0, h->n_seqs, err);
    if (rc)
        return rc;
    size_t at = 0;
    for (int32_t s = 0; s < h->n_seqs; s++) {
        if (words - at < 4)
            return sy_err_set(err, SY_ERR_INVALID, "step plan: sequence %d is cut off at word %zu", s, at);
        const int32_t *w = p->payload + at;
        if (w[0] < 0 || w[2] < 0 || (size_t)w[0] + (size_t)w[2] > words - at - 4)
            return sy_err_set(err, SY_ERR_INVALID, "step plan: sequence %d claims %d tokens and %d blocks, past the "
                              "end of %zu words", s, w[0], w[2], words);
        const int32_t mode = w[3] & 3, m = w[3] >> 2;
        if (w[3] < 0 || mode > 2 || m == 1 || m > SY_PLAN_MAX_ROWS || (m && (!mode || m > w[0])))
            return sy_err_set(err, SY_ERR_INVALID, "step plan: sequence %d wants logits word %d, expected 0, 1 or 2, "
                              "plus rows m << 2 with 2 <= m <= min(%d, its %d tokens)", s, w[3], SY_PLAN_MAX_ROWS, w[0]);
        p->seqs[s] = (sy_step_seq){.n_tokens = w[0], .ctx_len = w[1], .n_blocks = w[2], .want_logits = mode != 0,
                                   .n_logits = m, .greedy_id = mode == 2 ? p->greedy_sink : NULL, .tokens = w + 4,
                                   .blocks = w + 4 + w[0]};
        at += 4 + (size_t)w[0] + (size_t)w[2];
    }
    if (at != words)
        return sy_err_set(err, SY_ERR_INVALID, "step plan: %zu words left over after %d sequences", words - at,
                          h->n_seqs);
    return SY_OK;
}

void sy_plan_free(sy_plan *p)
{
    free(p->payload);
    free(p->seqs);
    free(p->mseqs);
    memset(p, 0, sizeof *p);
}

/* ------------------------------------------------------------ transport */

int sy_plan_send(sy_plan_chan *c, sy_plan *p, sy_err *err)
{
    p->hdr.seq = ++c->seq;
    if (!c->sockets) {
        int rc = c->com->broadcast(c->comm_inst, &p->hdr, sizeof p->hdr, 0, err);
        if (!rc && p->hdr.payload_bytes)
            rc = c->com->broadcast(c->comm_inst, p->payload, (size_t)p->hdr.payload_bytes, 0, err);
        return rc;
    }
    for (int r = 1; r < c->world; r++)
        if (sy_sock_send_full(c->fds[r], &p->hdr, sizeof p->hdr) ||
            (p->hdr.payload_bytes && sy_sock_send_full(c->fds[r], p->payload, (size_t)p->hdr.payload_bytes)))
            return sy_err_set(err, SY_ERR_UNAVAILABLE,
                              "tensor parallel: rank %d is gone (sending it step plan %llu failed: %s)", r,
                              (unsigned long long)p->hdr.seq, strerror(errno));
    return SY_OK;
}

int sy_plan_recv(sy_plan_chan *c, sy_plan *p, sy_err *err)
{
    int rc;
    if (!c->sockets) {
        if ((rc = c->com->broadcast(c->comm_inst, &p->hdr, sizeof p->hdr, 0, err)) ||
            (rc = sy_plan_reserve(p, err)))
            return rc;
        if (p->hdr.payload_bytes &&
            (rc = c->com->broadcast(c->comm_inst, p->payload, (size_t)p->hdr.payload_bytes, 0, err)))
            return rc;
    } else {
        /* One deadline for the whole plan: a rank 0 that stalls mid-plan counts as stuck too. */
        const double deadline = c->timeout_s > 0 ? sy_now() + c->timeout_s : 0;
        int r = sy_sock_recv_full(c->fds[0], &p->hdr, sizeof p->hdr, deadline);
        if (r == 0 && (rc = sy_plan_reserve(p, err)))
            return rc;
        if (r == 0 && p->hdr.payload_bytes)
            r = sy_sock_recv_full(c->fds[0], p->payload, (size_t)p->hdr.payload_bytes, deadline);
        if (r > 0)
            return sy_err_set(err, SY_ERR_UNAVAILABLE,
                              "tensor parallel: rank 0 closed the step-plan channel (it exited or was killed); "
                              "rank %d stops", c->rank);
        if (r < 0 && errno == ETIMEDOUT)
            return sy_err_set(err, SY_ERR_UNAVAILABLE,
                              "tensor parallel: rank %d got no step plan or heartbeat from rank 0 for %.1f s "
                              "(--dist-timeout); rank 0 is stuck", c->rank, c->timeout_s);
        if (r < 0)
            return sy_err_set(err, SY_ERR_UNAVAILABLE, "tensor parallel: rank %d reading the step plan: %s", c->rank,
                              strerror(errno));
    }
    if (p->hdr.seq != c->seq + 1)
        return sy_err_set(err, SY_ERR_INTERNAL, "tensor parallel: rank %d got step plan %llu after %llu", c->rank,
                          (unsigned long long)p->hdr.seq, (unsigned long long)c->seq);
    c->seq = p->hdr.seq;
    return sy_plan_decode(p, err);
}
