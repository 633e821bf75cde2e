/*
 * Quantised checkpoints: which scheme config.json (quantization_config) or
 * hf_quant_config.json declares, and the binding of each quantised weight's
 * scale tensors into its sy_tensor view. The weight bytes stay in the mmap;
 * nothing is widened.
 *
 *  - FP8 (quant_method "fp8", DeepSeek-V3 / transformers FineGrainedFP8):
 *    X.weight F8_E4M3 [N, K] and X.weight_scale_inv F32
 *    [ceil(N/b0), ceil(K/b1)] for weight_block_size [b0, b1]; without a
 *    block size one scale per tensor (X.weight_scale_inv or X.weight_scale,
 *    shape [] or [1]). Dequantised w = q * scale.
 *  - NVFP4 (NVIDIA ModelOpt: hf_quant_config.json quant_algo "NVFP4", or
 *    quantization_config quant_method "modelopt"): X.weight U8 [N, K/2]
 *    (two E2M1 codes a byte, element 2i in the low nibble), X.weight_scale
 *    F8_E4M3 [N, K/16], X.weight_scale_2 F32 scalar, X.input_scale F32
 *    scalar (read, unused: activations stay F32). w = q * scale * scale_2.
 *  - MXFP4 (quant_method "mxfp4", gpt-oss): only the routed experts, as
 *    X_blocks U8 [E, N, K/32, 16] and X_scales U8 (E8M0) [E, N, K/32];
 *    bound by model_gptoss.c, not by sy_model_quant_bind.
 * Modules listed in exclude_modules / modules_to_not_convert /
 * ignored_layers stay in their float dtype.
 */
#ifndef SY_MODEL_QUANT_H
#define SY_MODEL_QUANT_H

#include <stdint.h>

#include "model/safetensors.h"
#include "switchyard/plugin.h"

typedef enum sy_quant_method {
    SY_QUANT_NONE = 0,
    SY_QUANT_FP8,   /* F8_E4M3 weights, F32 scales (block or per tensor) */
    SY_QUANT_NVFP4, /* packed E2M1 weights, F8_E4M3 scales per 16, F32 global */
    SY_QUANT_MXFP4, /* gpt-oss: packed E2M1 expert weights, E8M0 scales per 32 (model_gptoss.c binds them) */
} sy_quant_method;

#define SY_QUANT_MAX_EXCLUDE 256

typedef struct sy_model_quant {
    sy_quant_method method;
    int32_t block[2];   /* FP8 weight_block_size; {0, 0}: one scale per tensor */
    char source[4224];  /* the file (and field) the scheme came from, for messages */
    char *exclude[SY_QUANT_MAX_EXCLUDE]; /* module name patterns (fnmatch), owned */
    int n_exclude;
} sy_model_quant;

/* "none", "fp8", "nvfp4", "mxfp4". */
const char *sy_quant_method_name(sy_quant_method m);

/*
 * Reads <dir>/config.json's quantization_config and <dir>/hf_quant_config.json.
 * No declaration: method NONE. Errors name the file and field.
 */
int sy_model_quant_load(const char *dir, sy_model_quant *q, sy_err *err);
void sy_model_quant_free(sy_model_quant *q);

/* 1 when name is a scale tensor of a quantised weight (X.weight_scale, _scale_inv, _scale_2, X.input_scale,
 * gpt-oss X_proj_scales). */
int sy_model_quant_is_scale(const char *name);

/* 1 when the weight `name` (X.weight) belongs to a module the config excludes from quantisation. */
int sy_model_quant_excluded(const sy_model_quant *q, const char *name);

/*
 * For a quantised weight entry e named `name` (X.weight): finds its scale
 * tensors, checks their dtype and shape against the weight, and fills *out
 * (the logical [N, K] view with scale fields set). The entries it read are
 * stored in used[] (*n_used, at most 4) so the loader counts them as bound.
 */
int sy_model_quant_bind(const sy_model_quant *q, const sy_safetensors *st, const char *file, const char *name,
                        const sy_st_entry *e, sy_tensor *out, const sy_st_entry **used, int *n_used, sy_err *err);

#endif
