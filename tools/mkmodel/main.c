/*
 * sy-mkmodel: writes a seeded synthetic Hugging Face checkpoint.
 *
 *   sy-mkmodel --out DIR [--preset NAME] [--arch llama|mixtral|qwen3_moe] [shape options]
 *
 * See usage() for every option. Same arguments, same bytes.
 */
#include "config.h"

#include "mkmodel.h"
#include "util/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct preset {
    const char *name;
    const char *what;
    mk_arch arch;
    int hidden, layers, heads, kv_heads, head_dim, ffn, vocab, experts, top_k, moe_ffn, max_pos;
    mk_dtype dtype;
    uint64_t seed;
    int tie;
    double rope_theta, rms_eps;
} preset;

static const preset presets[] = {
    {"small", "the build's models/small (tests, benchmarks): llama, GQA, f32, ~1M params", MK_LLAMA, 128, 4, 4, 2,
     0, 384, 1024, 0, 0, 0, 2048, MK_F32, 1, 0, 10000.0, 1e-5},
    {"test-llama", "like shared tiny-llama: 2 layers, hidden 64, GQA, untied, f32", MK_LLAMA, 64, 2, 4, 2, 0, 192,
     512, 0, 0, 0, 512, MK_F32, 6, 0, 10000.0, 1e-5},
    {"test-mixtral", "like shared tiny-mixtral: 4 experts top-2, expert ffn 96, bf16", MK_MIXTRAL, 64, 2, 4, 2, 0,
     96, 512, 4, 2, 96, 512, MK_BF16, 7, 0, 1e6, 1e-5},
    {"test-qwen3moe", "like shared tiny-qwen3moe: head_dim 32, q/k norm, 4 experts top-2, bf16", MK_QWEN3_MOE, 64,
     2, 4, 2, 32, 128, 512, 4, 2, 64, 512, MK_BF16, 7, 0, 1e6, 1e-6},
    {"test-deepseek-v3", "DeepSeek-V3 shaped: MLA (q_lora 32, kv_lora 32), yarn, 1 dense + 2 MoE layers, 8 experts in "
                         "4 groups, shared expert, bf16",
     MK_DEEPSEEK_V3, 64, 3, 4, 4, 0, 128, 512, 8, 2, 32, 512, MK_BF16, 8, 0, 10000.0, 1e-6},
    {"test-glm4-moe", "GLM-4.5 shaped: GQA, partial RoPE, q/k bias and norm, 1 dense + 2 MoE layers, shared expert, "
                      "bf16",
     MK_GLM4_MOE, 64, 3, 4, 2, 32, 128, 512, 8, 2, 32, 512, MK_BF16, 9, 0, 10000.0, 1e-5},
    {"test-glm5", "GLM-5 shaped (glm_moe_dsa): MLA + DSA indexer keeping 6 positions, 1 dense + 2 MoE layers, bf16",
     MK_GLM_MOE_DSA, 64, 3, 4, 4, 0, 128, 512, 8, 2, 32, 512, MK_BF16, 10, 0, 10000.0, 1e-5},
    {"test-deepseek-v32", "DeepSeek-V3.2 shaped: MLA + a DSA indexer (half-split RoPE) in every layer keeping 6 "
                          "positions, yarn, 1 dense + 2 MoE layers in 4 groups, 1 MTP layer, bf16",
     MK_DEEPSEEK_V32, 64, 3, 4, 4, 0, 128, 512, 8, 2, 32, 512, MK_BF16, 11, 0, 10000.0, 1e-6},
    {"test-gpt-oss", "gpt-oss shaped: sinks, sliding window 8 on even layers, head_dim 24 (heads*24 != hidden), "
                     "q/k/v/o/router/expert biases, clamped SwiGLU (limit 1.5), yarn, 4 experts top-2, bf16",
     MK_GPT_OSS, 64, 4, 4, 2, 24, 64, 512, 4, 2, 64, 512, MK_BF16, 12, 0, 150000.0, 1e-5},
    {"test-qwen2", "Qwen2.5 shaped: q/k/v biases, tied, GQA 4:2, 3 layers, f32 (no window; --sliding-window N "
                   "slides the layers from --max-window-layers on)",
     MK_QWEN2, 64, 3, 4, 2, 0, 160, 512, 0, 0, 0, 512, MK_F32, 13, 1, 1e6, 1e-6},
    {"test-qwen3", "dense Qwen3 shaped: per-head q/k norm, head_dim 32 (heads*32 != hidden), GQA 4:2, untied, bf16",
     MK_QWEN3, 64, 2, 4, 2, 32, 160, 512, 0, 0, 0, 512, MK_BF16, 14, 0, 1e6, 1e-6},
    {"bench-110m", "llama, ~110M params (stories110M's shape), tied, bf16", MK_LLAMA, 768, 12, 12, 12, 0, 2048,
     32000, 0, 0, 0, 2048, MK_BF16, 1, 1, 10000.0, 1e-5},
    {"bench-moe-250m", "mixtral, ~250M params, 8 experts top-2, GQA, bf16", MK_MIXTRAL, 768, 10, 12, 4, 0, 1024,
     32000, 8, 2, 1024, 2048, MK_BF16, 1, 0, 1e6, 1e-5},
};
#define NPRESETS (sizeof(presets) / sizeof(presets[0]))

static void usage(FILE *f)
{
    fprintf(f,
            "usage: sy-mkmodel --out DIR [--preset NAME] [--arch llama|mixtral|qwen3_moe] [options]\n"
            "\n"
            "Writes a synthetic Hugging Face checkpoint with seeded random weights:\n"
            "config.json, generation_config.json, model.safetensors (or shards and\n"
            "model.safetensors.index.json), tokenizer.json, tokenizer_config.json.\n"
            "The same arguments always give the same bytes.\n"
            "\n"
            "  --out DIR            output directory (created if missing; files are replaced)\n"
            "  --preset NAME        starting point (default: small; see --list-presets)\n"
            "  --arch A             llama, mixtral, qwen3_moe, deepseek_v3, glm4_moe, glm_moe_dsa,\n"
            "                       deepseek_v32, gpt_oss, mistral, qwen2 or qwen3;\n"
            "                       alone it starts from that arch's test preset\n"
            "  --hidden N           hidden_size\n"
            "  --layers N           num_hidden_layers\n"
            "  --heads N            num_attention_heads\n"
            "  --kv-heads N         num_key_value_heads (must divide --heads)\n"
            "  --head-dim N         head_dim (default hidden/heads; even)\n"
            "  --ffn N              intermediate_size of dense MLPs\n"
            "  --vocab N            vocab_size, %d..%d (tokenizer: 256 bytes, merges, 3 specials)\n"
            "  --experts N          experts per MoE layer (mixtral, qwen3_moe)\n"
            "  --top-k N            num_experts_per_tok\n"
            "  --moe-ffn N          expert width (mixtral's intermediate_size; default --ffn)\n"
            "  --max-pos N          max_position_embeddings\n"
            "  --dtype T            f32, bf16 or f16\n"
            "  --seed S             unsigned 64-bit seed\n"
            "  --tie / --no-tie     tie lm_head to the embedding (no lm_head.weight)\n"
            "  --shards N           N > 1: model-0000k-of-0000N.safetensors + index\n"
            "  --rope-theta F       rope_theta\n"
            "  --rms-eps F          rms_norm_eps\n"
            "  --rope-scaling T     none or llama3 (Llama 3.1's factor 8, 1, 4, 8192)\n"
            "  --sliding-window N   mistral, mixtral, qwen2, qwen3, gpt_oss: sliding_window N (qwen:\n"
            "                       use_sliding_window true); default none (gpt_oss: 8, even layers)\n"
            "  --max-window-layers N  qwen2, qwen3: layers i >= N slide (default 0: all)\n"
            "  --attention-bias     qwen3: q/k/v and o_proj biases (attention_bias true)\n"
            "  --sparse-step N      qwen3_moe decoder_sparse_step (MoE on layers (i+1) %% N == 0)\n"
            "  --mlp-only-layers L  qwen3_moe dense layers, comma-separated (e.g. 0,3)\n"
            "  --no-norm-topk-prob  qwen3_moe: do not renormalise the top-k weights\n"
            "  --q-lora-rank N      deepseek_v3: query LoRA rank; 0: a plain q_proj (q_lora_rank null)\n"
            "  --index-topk N       glm_moe_dsa, deepseek_v32: positions the DSA indexer keeps per query\n"
            "  --first-dense N      deepseek family: first_k_dense_replace (dense leading layers)\n"
            "  --mtp-layers N       deepseek family: num_nextn_predict_layers MTP layers after the decoder\n"
            "                       layers (model.layers.{layers+k}.*; default 1, 0: none)\n"
            "  --experts-layout L   gpt_oss: fused (transformers' unquantised gate_up_proj/down_proj) or\n"
            "                       mxfp4 (the published _blocks/_scales, quant_method mxfp4)\n"
            "  --quant Q            none, fp8 (128x128 blocks), fp8-tensor, nvfp4 or nvfp4-experts:\n"
            "                       linear layers stored quantised (embeddings, head, routers stay float)\n"
            "  --quiet              print nothing on success\n"
            "  --list-presets       print the presets and exit\n"
            "  --help               this text\n"
            "\n"
            "Init: matrices N(0, 1/fan_in), embedding N(0, 1) (tied: lm_head's scale),\n"
            "lm_head N(0, 9/hidden) for a logit std of about 3, norms 1 + 0.1 N(0, 1).\n",
            MK_MIN_VOCAB, MK_MAX_VOCAB);
}

static void list_presets(void)
{
    for (size_t i = 0; i < NPRESETS; i++)
        printf("%-15s %s\n", presets[i].name, presets[i].what);
    mk_quant_presets_list(stdout);
}

static void apply_preset(mk_spec *s, const preset *p)
{
    memset(s, 0, sizeof(*s));
    s->arch = p->arch;
    s->hidden = p->hidden;
    s->layers = p->layers;
    s->heads = p->heads;
    s->kv_heads = p->kv_heads;
    s->head_dim = p->head_dim;
    s->ffn = p->ffn;
    s->vocab = p->vocab;
    s->experts = p->experts;
    s->top_k = p->top_k;
    s->moe_ffn = p->moe_ffn;
    s->max_pos = p->max_pos;
    s->dtype = p->dtype;
    s->seed = p->seed;
    s->tie = p->tie;
    s->shards = 1;
    s->rope_theta = p->rope_theta;
    s->rms_eps = p->rms_eps;
    s->norm_topk_prob = 1;
    s->sparse_step = 1;
    mk_ds_defaults(s);
    mk_gptoss_defaults(s);
}

static const preset *find_preset(const char *name)
{
    for (size_t i = 0; i < NPRESETS; i++)
        if (strcmp(presets[i].name, name) == 0)
            return &presets[i];
    return NULL;
}

static int fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("sy-mkmodel: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return -1;
}

static int parse_int(const char *opt, const char *v, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*v == '\0' || *end != '\0' || errno != 0)
        return fail("%s: expected an integer, got '%s'", opt, v);
    if (x < lo || x > hi)
        return fail("%s: expected an integer in %d..%d, got %ld", opt, lo, hi, x);
    *out = (int)x;
    return 0;
}

static int parse_pos_double(const char *opt, const char *v, double *out)
{
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    if (*v == '\0' || *end != '\0' || errno != 0 || !(x > 0.0) || x > 1e300)
        return fail("%s: expected a positive number, got '%s'", opt, v);
    *out = x;
    return 0;
}

static int parse_arch(const char *v, mk_arch *out)
{
    if (strcmp(v, "llama") == 0)
        *out = MK_LLAMA;
    else if (strcmp(v, "mixtral") == 0)
        *out = MK_MIXTRAL;
    else if (strcmp(v, "qwen3_moe") == 0 || strcmp(v, "qwen3moe") == 0)
        *out = MK_QWEN3_MOE;
    else if (strcmp(v, "deepseek_v3") == 0)
        *out = MK_DEEPSEEK_V3;
    else if (strcmp(v, "glm4_moe") == 0)
        *out = MK_GLM4_MOE;
    else if (strcmp(v, "glm_moe_dsa") == 0)
        *out = MK_GLM_MOE_DSA;
    else if (strcmp(v, "deepseek_v32") == 0)
        *out = MK_DEEPSEEK_V32;
    else if (strcmp(v, "gpt_oss") == 0)
        *out = MK_GPT_OSS;
    else if (strcmp(v, "mistral") == 0)
        *out = MK_MISTRAL;
    else if (strcmp(v, "qwen2") == 0)
        *out = MK_QWEN2;
    else if (strcmp(v, "qwen3") == 0)
        *out = MK_QWEN3;
    else
        return fail("--arch: expected llama, mixtral, qwen3_moe, deepseek_v3, glm4_moe, glm_moe_dsa, deepseek_v32, "
                    "gpt_oss, mistral, qwen2 or qwen3, got '%s'",
                    v);
    return 0;
}

static int parse_layer_list(const char *v, mk_spec *s)
{
    memset(s->mlp_only, 0, sizeof(s->mlp_only));
    const char *p = v;
    while (*p) {
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno != 0 || x < 0 || x >= MK_MAX_LAYERS || (*end != ',' && *end != '\0'))
            return fail("--mlp-only-layers: expected comma-separated layer numbers (e.g. 0,3), got '%s'", v);
        s->mlp_only[x] = 1;
        p = *end == ',' ? end + 1 : end;
    }
    return 0;
}

typedef struct opts {
    const char *out;
    int quiet;
    /* which shape options were given explicitly */
    int given_head_dim, given_experts, given_arch;
} opts;

/* Value of an option: "--opt=v" or "--opt v". NULL (and a message) if missing. */
static const char *opt_value(int argc, char **argv, int *i, const char *name)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (a[n] == '=')
        return a + n + 1;
    if (*i + 1 >= argc) {
        fail("%s: expected a value", name);
        return NULL;
    }
    return argv[++*i];
}

/* 1 when argv[i] is --name or --name=... */
static int is_opt(const char *a, const char *name)
{
    size_t n = strlen(name);
    return strncmp(a, name, n) == 0 && (a[n] == '\0' || a[n] == '=');
}

static int parse_args(int argc, char **argv, mk_spec *s, opts *o)
{
    /* First the base: --preset, else --arch's preset, else small. */
    const preset *base = NULL;
    const char *qpreset = NULL;
    mk_arch arch_only = MK_LLAMA;
    int have_arch = 0;
    for (int i = 1; i < argc; i++) {
        if (is_opt(argv[i], "--preset")) {
            const char *v = opt_value(argc, argv, &i, "--preset");
            if (!v)
                return -1;
            base = find_preset(v);
            if (!base && mk_quant_preset_base(v)) { /* a quantised preset: its float base, then the changes */
                base = find_preset(mk_quant_preset_base(v));
                qpreset = v;
            }
            if (!base) {
                fprintf(stderr, "sy-mkmodel: --preset: unknown preset '%s'; expected one of:", v);
                for (size_t k = 0; k < NPRESETS; k++)
                    fprintf(stderr, " %s", presets[k].name);
                fputc('\n', stderr);
                return -1;
            }
        } else if (is_opt(argv[i], "--arch")) {
            const char *v = opt_value(argc, argv, &i, "--arch");
            if (!v || parse_arch(v, &arch_only) != 0)
                return -1;
            have_arch = 1;
        }
    }
    if (!base)
        base = find_preset(!have_arch || arch_only == MK_LLAMA ? "small"
                           : arch_only == MK_MIXTRAL           ? "test-mixtral"
                           : arch_only == MK_DEEPSEEK_V3       ? "test-deepseek-v3"
                           : arch_only == MK_GLM4_MOE          ? "test-glm4-moe"
                           : arch_only == MK_GLM_MOE_DSA       ? "test-glm5"
                           : arch_only == MK_DEEPSEEK_V32      ? "test-deepseek-v32"
                           : arch_only == MK_GPT_OSS           ? "test-gpt-oss"
                           : arch_only == MK_MISTRAL           ? "test-llama"
                           : arch_only == MK_QWEN2             ? "test-qwen2"
                           : arch_only == MK_QWEN3             ? "test-qwen3"
                                                               : "test-qwen3moe");
    apply_preset(s, base);
    if (qpreset)
        mk_quant_preset_apply(qpreset, s);

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int rc = 0;
#define VAL(name)                                                                                                      \
    do {                                                                                                               \
        v = opt_value(argc, argv, &i, name);                                                                           \
        if (!v)                                                                                                        \
            return -1;                                                                                                 \
    } while (0)
#define INTOPT(name, field, lo, hi)                                                                                    \
    else if (is_opt(a, name))                                                                                          \
    {                                                                                                                  \
        VAL(name);                                                                                                     \
        rc = parse_int(name, v, lo, hi, &s->field);                                                                    \
    }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--list-presets") == 0) {
            list_presets();
            exit(0);
        } else if (is_opt(a, "--out")) {
            VAL("--out");
            o->out = v;
        } else if (is_opt(a, "--preset")) {
            VAL("--preset"); /* handled above */
        } else if (is_opt(a, "--arch")) {
            VAL("--arch");
            mk_arch ar;
            rc = parse_arch(v, &ar);
            if (rc == 0 && ar != s->arch) {
                s->arch = ar;
                mk_ds_defaults(s);
                if (mk_is_dense_arch(s)) {
                    s->experts = s->top_k = s->moe_ffn = 0;
                } else if (s->experts == 0) {
                    s->experts = 4;
                    s->top_k = 2;
                }
            }
            o->given_arch = 1;
        }
        INTOPT("--hidden", hidden, 1, 1 << 20)
        INTOPT("--layers", layers, 1, MK_MAX_LAYERS)
        INTOPT("--heads", heads, 1, 1 << 16)
        INTOPT("--kv-heads", kv_heads, 1, 1 << 16)
        INTOPT("--ffn", ffn, 1, 1 << 24)
        INTOPT("--vocab", vocab, MK_MIN_VOCAB, MK_MAX_VOCAB)
        INTOPT("--top-k", top_k, 1, 1 << 16)
        INTOPT("--moe-ffn", moe_ffn, 1, 1 << 24)
        INTOPT("--max-pos", max_pos, 1, 1 << 30)
        INTOPT("--shards", shards, 1, 1 << 16)
        INTOPT("--sparse-step", sparse_step, 1, MK_MAX_LAYERS)
        INTOPT("--q-lora-rank", ds.q_lora, 0, 1 << 20)
        INTOPT("--index-topk", ds.index_topk, 1, 1 << 20)
        INTOPT("--first-dense", ds.first_dense, 0, MK_MAX_LAYERS)
        INTOPT("--mtp-layers", ds.mtp_layers, 0, 16)
        INTOPT("--sliding-window", sliding_window, 1, 1 << 30)
        INTOPT("--max-window-layers", max_window_layers, 0, MK_MAX_LAYERS)
        else if (is_opt(a, "--head-dim"))
        {
            VAL("--head-dim");
            rc = parse_int("--head-dim", v, 2, 1 << 16, &s->head_dim);
            o->given_head_dim = 1;
        }
        else if (is_opt(a, "--experts"))
        {
            VAL("--experts");
            rc = parse_int("--experts", v, 1, 1 << 16, &s->experts);
            o->given_experts = 1;
        }
        else if (is_opt(a, "--dtype"))
        {
            VAL("--dtype");
            if (strcmp(v, "f32") == 0 || strcmp(v, "float32") == 0)
                s->dtype = MK_F32;
            else if (strcmp(v, "bf16") == 0 || strcmp(v, "bfloat16") == 0)
                s->dtype = MK_BF16;
            else if (strcmp(v, "f16") == 0 || strcmp(v, "float16") == 0)
                s->dtype = MK_F16;
            else
                rc = fail("--dtype: expected f32, bf16 or f16, got '%s'", v);
        }
        else if (is_opt(a, "--seed"))
        {
            VAL("--seed");
            char *end;
            errno = 0;
            unsigned long long x = strtoull(v, &end, 10);
            if (*v == '\0' || *v == '-' || *end != '\0' || errno != 0)
                rc = fail("--seed: expected an unsigned 64-bit integer, got '%s'", v);
            s->seed = (uint64_t)x;
        }
        else if (strcmp(a, "--tie") == 0)
        {
            s->tie = 1;
        }
        else if (strcmp(a, "--no-tie") == 0)
        {
            s->tie = 0;
        }
        else if (is_opt(a, "--rope-theta"))
        {
            VAL("--rope-theta");
            rc = parse_pos_double("--rope-theta", v, &s->rope_theta);
        }
        else if (is_opt(a, "--rms-eps"))
        {
            VAL("--rms-eps");
            rc = parse_pos_double("--rms-eps", v, &s->rms_eps);
        }
        else if (is_opt(a, "--rope-scaling"))
        {
            VAL("--rope-scaling");
            if (strcmp(v, "none") == 0)
                s->rope_llama3 = 0;
            else if (strcmp(v, "llama3") == 0)
                s->rope_llama3 = 1;
            else
                rc = fail("--rope-scaling: expected none or llama3, got '%s'", v);
        }
        else if (is_opt(a, "--mlp-only-layers"))
        {
            VAL("--mlp-only-layers");
            rc = parse_layer_list(v, s);
        }
        else if (strcmp(a, "--attention-bias") == 0)
        {
            s->attn_bias = 1;
        }
        else if (strcmp(a, "--no-norm-topk-prob") == 0)
        {
            s->norm_topk_prob = 0;
        }
        else if (is_opt(a, "--experts-layout"))
        {
            VAL("--experts-layout");
            if (strcmp(v, "fused") == 0 || strcmp(v, "mxfp4") == 0)
                s->oss.mxfp4 = strcmp(v, "mxfp4") == 0;
            else
                rc = fail("--experts-layout: expected fused or mxfp4, got '%s'", v);
        }
        else if (is_opt(a, "--quant"))
        {
            VAL("--quant");
            if (mk_quant_parse(v, &s->quant) != 0)
                rc = fail("--quant: expected none, fp8, fp8-tensor, nvfp4 or nvfp4-experts, got '%s'", v);
        }
        else if (strcmp(a, "--quiet") == 0)
        {
            o->quiet = 1;
        }
        else
        {
            rc = fail("unknown argument '%s' (expected an option; see --help)", a);
        }
        if (rc != 0)
            return -1;
#undef INTOPT
#undef VAL
    }
    return 0;
}

/* Fills derived values and checks the shape; messages say what was expected. */
static int validate(mk_spec *s, const opts *o)
{
    if (!o->out)
        return fail("--out DIR is required (the directory to write the checkpoint to)");
    if (s->head_dim == 0) {
        if (s->hidden % s->heads != 0)
            return fail("--hidden %d is not a multiple of --heads %d: give --head-dim explicitly", s->hidden,
                        s->heads);
        s->head_dim = s->hidden / s->heads;
    }
    if (s->head_dim % 2 != 0)
        return fail("head_dim must be even for rotary embeddings, got %d (--hidden %d / --heads %d)", s->head_dim,
                    s->hidden, s->heads);
    if (s->heads % s->kv_heads != 0)
        return fail("--kv-heads %d must divide --heads %d", s->kv_heads, s->heads);
    if (s->oss.mxfp4 && s->arch != MK_GPT_OSS)
        return fail("--experts-layout is a gpt_oss option (this is %s)", mk_arch_name(s->arch));
    if (s->arch == MK_GPT_OSS && s->quant)
        return fail("--quant %s: gpt_oss checkpoints quantise their experts with --experts-layout mxfp4",
                    mk_quant_name(s->quant));
    if (s->sliding_window > 0 && s->arch != MK_MISTRAL && s->arch != MK_MIXTRAL && s->arch != MK_QWEN2 &&
        s->arch != MK_QWEN3 && s->arch != MK_GPT_OSS)
        return fail("--sliding-window is a mistral, mixtral, qwen2, qwen3 or gpt_oss option (this is %s)",
                    mk_arch_name(s->arch));
    if (s->max_window_layers > 0 && s->arch != MK_QWEN2 && s->arch != MK_QWEN3)
        return fail("--max-window-layers is a qwen2 or qwen3 option (this is %s)", mk_arch_name(s->arch));
    if (s->attn_bias && s->arch != MK_QWEN3)
        return fail("--attention-bias is a qwen3 option (this is %s)", mk_arch_name(s->arch));
    if (mk_is_dense_arch(s)) {
        if (o->given_experts)
            return fail("--experts: %s has no experts (expected --arch mixtral or qwen3_moe)", mk_arch_name(s->arch));
        s->experts = s->top_k = 0;
    } else {
        if (s->experts < 1)
            return fail("--experts: %s needs at least 1 expert", mk_arch_name(s->arch));
        if (s->top_k < 1 || s->top_k > s->experts)
            return fail("--top-k %d: expected 1..%d (the number of experts)", s->top_k, s->experts);
    }
    if (mk_has_indexer(s) && s->ds.q_lora < 1)
        return fail("--q-lora-rank: %s needs a query LoRA (its indexer reads the query latent), got %d",
                    mk_arch_name(s->arch), s->ds.q_lora);
    if (!mk_is_deepseek_family(s) && s->ds.mtp_layers > 0)
        return fail("--mtp-layers is a deepseek-family option (this is %s)", mk_arch_name(s->arch));
    if (mk_is_deepseek_family(s) && s->ds.n_group > 0 && s->experts % s->ds.n_group != 0)
        return fail("--experts %d: the %s preset routes in %d groups; expected a multiple of %d", s->experts,
                    mk_arch_name(s->arch), s->ds.n_group, s->ds.n_group);
    for (int i = s->layers; i < MK_MAX_LAYERS; i++)
        if (s->mlp_only[i])
            return fail("--mlp-only-layers: layer %d does not exist (expected 0..%d)", i, s->layers - 1);
    if (s->arch != MK_QWEN3_MOE) {
        for (int i = 0; i < s->layers; i++)
            if (s->mlp_only[i])
                return fail("--mlp-only-layers is a qwen3_moe option (this is %s)", mk_arch_name(s->arch));
        if (s->sparse_step != 1)
            return fail("--sparse-step is a qwen3_moe option (this is %s)", mk_arch_name(s->arch));
    }
    size_t n = 0;
    mk_tensor *t = mk_plan_tensors(s, &n);
    if (!t)
        return fail("out of memory");
    free(t);
    if ((size_t)s->shards > n)
        return fail("--shards %d: expected at most %zu (the number of tensors)", s->shards, n);
    return 0;
}

static int make_dir(const char *dir)
{
    char buf[4096];
    size_t n = strlen(dir);
    if (n == 0 || n >= sizeof(buf))
        return fail("--out: expected a directory path of 1..%zu characters", sizeof(buf) - 1);
    memcpy(buf, dir, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] != '/' && buf[i] != '\0')
            continue;
        char c = buf[i];
        buf[i] = '\0';
        if (mkdir(buf, 0777) != 0 && errno != EEXIST)
            return fail("--out: cannot create directory %s: %s", buf, strerror(errno));
        buf[i] = c;
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return fail("--out: %s exists and is not a directory", dir);
    return 0;
}

/* Parameters one token uses: everything but the experts it is not routed to. */
static uint64_t active_params(const mk_spec *s, uint64_t total)
{
    if (mk_is_dense_arch(s))
        return total;
    uint64_t per_expert = 3ull * (uint64_t)s->hidden * (uint64_t)mk_expert_ffn(s);
    uint64_t idle = 0;
    for (int i = 0; i < s->layers; i++)
        if (!mk_layer_is_dense(s, i))
            idle += (uint64_t)(s->experts - s->top_k) * per_expert;
    return total - idle;
}

int main(int argc, char **argv)
{
    mk_spec *s = calloc(1, sizeof(*s));
    opts o = {0};
    if (!s)
        return 1;
    if (argc == 1) {
        usage(stderr);
        free(s);
        return 2;
    }
    if (parse_args(argc, argv, s, &o) != 0 || validate(s, &o) != 0 || make_dir(o.out) != 0) {
        free(s);
        return 2;
    }
    double t0 = sy_now();
    char err[1024] = "";
    int rc = mk_write_configs(s, o.out, err, sizeof(err));
    if (rc == 0)
        rc = mk_write_tokenizer(s, o.out, err, sizeof(err));
    if (rc == 0)
        rc = s->arch == MK_GPT_OSS && s->oss.mxfp4 ? mk_gptoss_write_mxfp4(s, o.out, err, sizeof(err))
             : s->quant                            ? mk_write_quant_weights(s, o.out, err, sizeof(err))
                                                   : mk_write_weights(s, o.out, err, sizeof(err));
    if (rc != 0) {
        fail("%s", err);
        free(s);
        return 1;
    }
    if (!o.quiet) {
        size_t n = 0;
        mk_tensor *t = mk_plan_tensors(s, &n);
        uint64_t params = t ? mk_count_params(t, n) : 0;
        free(t);
        printf("sy-mkmodel: wrote %s: %s, %d layer%s, hidden %d, heads %d/%d, head_dim %d, vocab %d", o.out,
               mk_arch_name(s->arch), s->layers, s->layers == 1 ? "" : "s", s->hidden, s->heads, s->kv_heads,
               s->head_dim, s->vocab);
        if (!mk_is_dense_arch(s))
            printf(", %d experts top-%d", s->experts, s->top_k);
        printf(", %s, seed %" PRIu64 "; %" PRIu64 " params", mk_dtype_name(s->dtype), s->seed, params);
        if (!mk_is_dense_arch(s))
            printf(" (%" PRIu64 " active)", active_params(s, params));
        printf(", %.1f MB of weights, %.2f s\n", (double)params * (double)mk_dtype_size(s->dtype) / 1e6,
               sy_now() - t0);
    }
    free(s);
    return 0;
}
