/* The draft source [speculative] method names. */
#include "config.h"

#include "spec/spec.h"

int sy_spec_source_new(const sy_spec_config *cfg, const sy_config *full_cfg, sy_engine *target,
                       sy_spec_source **out, sy_err *err)
{
    *out = NULL;
    switch (cfg->method) {
    case SY_SPEC_NONE:
        return SY_OK;
    case SY_SPEC_NGRAM:
        return sy__spec_ngram_new(cfg, target, out, err);
    case SY_SPEC_MTP:
        return sy__spec_mtp_new(cfg, target, out, err);
    case SY_SPEC_DRAFT:
        return sy__spec_draft_new(cfg, full_cfg, target, out, err);
    }
    return sy_err_set(err, SY_ERR_INVALID, "[speculative] method %d: expected none, ngram, mtp or draft",
                      (int)cfg->method);
}
