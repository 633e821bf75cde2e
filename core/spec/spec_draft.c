/* PLACEHOLDER written by the lead so the tree links; the draft helper replaces this file whole. */
#include "config.h"

#include "spec/spec.h"

int sy__spec_draft_new(const sy_spec_config *cfg, const sy_config *full_cfg, sy_engine *target,
                       sy_spec_source **out, sy_err *err)
{
    (void)cfg, (void)full_cfg, (void)target, (void)out;
    return sy_err_set(err, SY_ERR_UNSUPPORTED, "[speculative] method = draft is not built yet");
}
