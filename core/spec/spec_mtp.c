/* PLACEHOLDER written by the lead so the tree links; the mtp helper replaces this file whole. */
#include "config.h"

#include "spec/spec.h"

int sy__spec_mtp_new(const sy_spec_config *cfg, sy_engine *target, sy_spec_source **out, sy_err *err)
{
    (void)cfg, (void)target, (void)out;
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "[speculative] method = mtp is not built yet");
}
