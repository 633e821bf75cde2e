/*
 * The argument checks every comm plugin makes before a collective (the
 * contract of sy_comm_ops in switchyard/plugin.h), in one place so that a
 * caller's mistake reads the same whichever plugin carries the group.
 * Header-only: the comm plugins share no library.
 */
#ifndef SY_COMM_ARGS_H
#define SY_COMM_ARGS_H

#include <string.h>

#include "switchyard/plugin.h"

/* Row-major with no gaps (dims of extent 1 may have any stride). */
static inline int syc_contiguous(const sy_tensor *t)
{
    int64_t s = 1;
    for (int i = t->ndim - 1; i >= 0; i--) {
        if (t->shape[i] > 1 && t->stride[i] != s)
            return 0;
        s *= t->shape[i];
    }
    return 1;
}

/* allreduce_sum: a contiguous F32 tensor. */
static inline int syc_check_allreduce(const sy_tensor *t, sy_err *err)
{
    if (!t)
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: tensor is NULL");
    if (t->dtype != SY_DTYPE_F32)
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: tensor must be F32, found %s", sy_dtype_name(t->dtype));
    if (t->ndim < 0 || t->ndim > SY_MAX_DIMS || !syc_contiguous(t))
        return sy_err_set(err, SY_ERR_INVALID, "allreduce_sum: tensor must be contiguous with 0..%d dims",
                          SY_MAX_DIMS);
    return SY_OK;
}

/* allgather over world ranks: out is in's shape with dim 0 times world, both contiguous, one dtype. */
static inline int syc_check_allgather(const sy_tensor *in, const sy_tensor *out, int world, sy_err *err)
{
    if (!in || !out)
        return sy_err_set(err, SY_ERR_INVALID, "allgather: %s is NULL", in ? "out" : "in");
    if (in->dtype != out->dtype)
        return sy_err_set(err, SY_ERR_INVALID, "allgather: in is %s but out is %s", sy_dtype_name(in->dtype),
                          sy_dtype_name(out->dtype));
    if (in->ndim < 1 || in->ndim > SY_MAX_DIMS || out->ndim != in->ndim || out->shape[0] != in->shape[0] * world ||
        (in->ndim > 1 && memcmp(in->shape + 1, out->shape + 1, sizeof(int64_t) * (size_t)(in->ndim - 1)) != 0))
        return sy_err_set(err, SY_ERR_INVALID,
                          "allgather: out must be in's shape with dim 0 times %d ranks (in %lld elements in %d dims, "
                          "out %lld elements in %d dims)",
                          world, (long long)sy_tensor_numel(in), in->ndim, (long long)sy_tensor_numel(out),
                          out->ndim);
    if (!syc_contiguous(in) || !syc_contiguous(out))
        return sy_err_set(err, SY_ERR_INVALID, "allgather: in and out must be contiguous");
    return SY_OK;
}

/* broadcast of bytes from root, one of world ranks. */
static inline int syc_check_broadcast(const void *buf, size_t bytes, int root, int world, sy_err *err)
{
    if (root < 0 || root >= world)
        return sy_err_set(err, SY_ERR_INVALID, "broadcast: root %d is not in 0..%d", root, world - 1);
    if (bytes && !buf)
        return sy_err_set(err, SY_ERR_INVALID, "broadcast: buf is NULL");
    return SY_OK;
}

#endif
