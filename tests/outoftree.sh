#!/bin/sh
# A plugin built out of tree, with nothing but the installed header and
# `pkg-config --cflags switchyard-plugin`, is found and listed by the
# installed `switchyard plugins`; a config naming it selects it, and its
# keys are checked against its declarations.
#
#   tests/outoftree.sh
#       (make check) first installs the binary, the header, the pkg-config
#       file and the plugins from $SY_BUILDDIR into a scratch DESTDIR.
#   tests/outoftree.sh --installed SWITCHYARD_BIN PKGCONFIG_DIR [DESTDIR]
#       (make installcheck-outoftree) uses an existing installation.
#
# The generated oot.ini is where a later step can point the engine at the
# out-of-tree plugin ([attention] plugin = <path>) and run `generate`.
set -eu

fail() {
    echo "outoftree: FAIL: $*" >&2
    exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sy-outoftree.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

if [ "${1:-}" = --installed ]; then
    [ $# -ge 3 ] || fail "usage: $0 --installed SWITCHYARD_BIN PKGCONFIG_DIR [DESTDIR]"
    bin=$2
    pcdir=$3
    sysroot=${4:-}
else
    [ -n "${SY_BUILDDIR:-}" ] || fail "SY_BUILDDIR is not set (run through make check)"
    sysroot=$tmp/root
    # Only the install rules a plugin author's view needs: none rebuilds
    # anything or touches build-plugins/, which tests running beside this
    # one read. The parent make's jobserver flags are not ours to use.
    if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL "${MAKE:-make}" -s -C "$SY_BUILDDIR" DESTDIR="$sysroot" \
        install-binPROGRAMS install-pkgincludeHEADERS install-pkgconfigDATA install-pluginLTLIBRARIES \
        >"$tmp/install.log" 2>&1; then
        cat "$tmp/install.log" >&2
        fail "installing into $sysroot failed"
    fi
    bin=$(find "$sysroot" -path '*/bin/switchyard' -type f | head -n 1)
    pc=$(find "$sysroot" -name switchyard-plugin.pc | head -n 1)
    [ -n "$bin" ] && [ -n "$pc" ] || fail "the install into $sysroot lacks bin/switchyard or switchyard-plugin.pc"
    pcdir=$(dirname "$pc")
fi
[ -x "$bin" ] || fail "$bin is not an executable"

# pkg-config sees only the installation under test; the sysroot maps its
# paths into the DESTDIR, and system include dirs are kept (prefix=/usr).
pkgconf() {
    PKG_CONFIG_PATH=$pcdir PKG_CONFIG_LIBDIR=$pcdir PKG_CONFIG_SYSROOT_DIR=$sysroot PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 \
        "${PKG_CONFIG:-pkg-config}" "$@"
}
cflags=$(pkgconf --cflags switchyard-plugin) || fail "pkg-config --cflags switchyard-plugin failed (PKG_CONFIG_PATH=$pcdir)"
# Some pkg-config implementations put the sysroot before variables, some do not.
plugindir=$(pkgconf --variable=plugindir switchyard-plugin)
case $plugindir in
"$sysroot"/*) ;;
*) plugindir=$sysroot$plugindir ;;
esac

mkdir "$tmp/plugins" "$tmp/src"
cat >"$tmp/src/oot-attn.c" <<'EOF'
/* An attention plugin written by a third party: the public header only. */
#include <switchyard/plugin.h>

#include <math.h>

/* Plain paged attention: K and V caches [layer][block][slot][kv_head][dim]. */
typedef struct inst {
    const sy_host *host;
    char greeting[64];
    sy_attn_problem p;
    float *kc, *vc;
    float *scores; /* one row of max positions */
} inst;

static int probe(const sy_host *host, sy_err *why)
{
    if (!host || host->abi_major != SY_ABI_MAJOR)
        return sy_err_set(why, 0, "oot-attn: host speaks another ABI");
    return 7;
}

static int create(const sy_host *host, const sy_kv *cfg, size_t n_cfg, void **out, sy_err *err)
{
    inst *in = host->alloc(host->ctx, sizeof *in, 16);
    if (!in)
        return sy_err_set(err, SY_ERR_NOMEM, "oot-attn: no memory");
    memset(in, 0, sizeof *in);
    in->host = host;
    snprintf(in->greeting, sizeof in->greeting, "%s", sy_kv_get(cfg, n_cfg, "greeting"));
    sy_logf(host, SY_LOG_INFO, "oot-attn", "created: %s", in->greeting);
    *out = in;
    return SY_OK;
}

static void destroy(void *vp)
{
    inst *in = vp;
    in->host->free(in->host->ctx, in->kc);
    in->host->free(in->host->ctx, in->vc);
    in->host->free(in->host->ctx, in->scores);
    in->host->free(in->host->ctx, in);
}

static int supports(void *i, const sy_attn_problem *p, sy_err *why)
{
    (void)i;
    if (p->v_head_dim != p->head_dim || p->sliding_window)
        return sy_err_set(why, 0, "oot-attn: only plain attention with v_head_dim == head_dim");
    return 1;
}

static int prepare(void *i, const sy_attn_problem *p, sy_err *err)
{
    inst *in = i;
    size_t n = (size_t)p->n_layers * p->n_blocks * p->block_size * p->n_kv_heads * p->head_dim;
    in->p = *p;
    in->kc = in->host->alloc(in->host->ctx, n * sizeof(float), 64);
    in->vc = in->host->alloc(in->host->ctx, n * sizeof(float), 64);
    in->scores = in->host->alloc(in->host->ctx, (size_t)p->n_blocks * p->block_size * sizeof(float), 64);
    if (!in->kc || !in->vc || !in->scores)
        return sy_err_set(err, SY_ERR_NOMEM, "oot-attn: no memory for the KV cache");
    return SY_OK;
}

static float *slot(const inst *in, float *base, int32_t layer, int32_t block, int32_t s)
{
    const sy_attn_problem *p = &in->p;
    return base + ((((size_t)layer * p->n_blocks + block) * p->block_size + s) * p->n_kv_heads) * p->head_dim;
}

static int forward(void *i, int32_t layer, const sy_attn_batch *b, const sy_tensor *q, const sy_tensor *k,
                   const sy_tensor *v, sy_tensor *out, sy_err *err)
{
    inst *in = i;
    const sy_attn_problem *p = &in->p;
    const int32_t D = p->head_dim, KV = p->n_kv_heads, G = p->n_heads / p->n_kv_heads, BS = p->block_size;
    (void)err;
    for (int32_t s = 0; s < b->n_seqs; s++) {
        const int32_t *bt = b->block_table + (size_t)s * b->max_blocks;
        for (int32_t t = b->tok_start[s]; t < b->tok_start[s + 1]; t++) {
            int32_t pos = b->ctx_len[s] + (t - b->tok_start[s]);
            memcpy(slot(in, in->kc, layer, bt[pos / BS], pos % BS), (const float *)k->data + (size_t)t * KV * D,
                   sizeof(float) * (size_t)KV * D);
            memcpy(slot(in, in->vc, layer, bt[pos / BS], pos % BS), (const float *)v->data + (size_t)t * KV * D,
                   sizeof(float) * (size_t)KV * D);
        }
        for (int32_t t = b->tok_start[s]; t < b->tok_start[s + 1]; t++) {
            int32_t pos = b->ctx_len[s] + (t - b->tok_start[s]);
            for (int32_t h = 0; h < p->n_heads; h++) {
                const float *qv = (const float *)q->data + ((size_t)t * p->n_heads + h) * D;
                float *o = (float *)out->data + ((size_t)t * p->n_heads + h) * D;
                float mx = -INFINITY;
                for (int32_t j = 0; j <= pos; j++) {
                    const float *kv = slot(in, in->kc, layer, bt[j / BS], j % BS) + (size_t)(h / G) * D;
                    float d = 0;
                    for (int32_t x = 0; x < D; x++)
                        d += qv[x] * kv[x];
                    in->scores[j] = d * p->scale;
                    if (in->scores[j] > mx)
                        mx = in->scores[j];
                }
                double sum = 0;
                for (int32_t j = 0; j <= pos; j++)
                    sum += (in->scores[j] = expf(in->scores[j] - mx));
                for (int32_t x = 0; x < D; x++)
                    o[x] = 0;
                for (int32_t j = 0; j <= pos; j++) {
                    const float *vv = slot(in, in->vc, layer, bt[j / BS], j % BS) + (size_t)(h / G) * D;
                    float w = (float)(in->scores[j] / sum);
                    for (int32_t x = 0; x < D; x++)
                        o[x] += w * vv[x];
                }
            }
        }
    }
    return SY_OK;
}

static const sy_attn_ops ops = {sizeof(sy_attn_ops), supports, prepare, forward, NULL, NULL};

static const sy_key_decl keys[] = {
    {"greeting", SY_KEY_STRING, "hello", "what create() logs", 1, 0, NULL},
    {NULL, SY_KEY_STRING, NULL, NULL, 0, 0, NULL},
};

static const sy_plugin_desc desc = {
    sizeof(sy_plugin_desc), SY_ABI_MAJOR, SY_ABI_MINOR, SY_KIND_ATTN, "oot-attn", "1.2.3", "cpu",
    "out-of-tree test plugin", keys, probe, create, destroy, &ops, NULL,
};

SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void);
SY_EXPORT const sy_plugin_desc *SY_PLUGIN_ENTRY(void)
{
    return &desc;
}
EOF
printf 'int oot_helper(void);\nint oot_helper(void) { return 1; }\n' >"$tmp/src/helper.c"

# Strict C99: the public header must not need anything newer.
cc=${CC:-cc}
# shellcheck disable=SC2086 # cflags is a list of words
$cc -std=c99 -pedantic -Wall -Wextra -Werror -shared -fPIC $cflags "$tmp/src/oot-attn.c" \
    -o "$tmp/plugins/oot-attn.so" -Wl,--no-undefined -lm || fail "the out-of-tree plugin does not build with: $cflags"
$cc -shared -fPIC "$tmp/src/helper.c" -o "$tmp/plugins/libhelper.so" || fail "cannot build the helper library"

# Only the entry point is exported (the .pc file brings -fvisibility=hidden).
exports=$("${NM:-nm}" -D --defined-only "$tmp/plugins/oot-attn.so" | awk '$3 !~ /^_/ { print $3 }' | sort | tr '\n' ' ')
[ "$exports" = "sy_plugin_v1 " ] || fail "oot-attn.so should export only sy_plugin_v1, exports: $exports"

cat >"$tmp/oot.ini" <<EOF
; written by tests/outoftree.sh
[attention]
plugin = oot-attn
greeting = bonjour
EOF

set -- plugins -c "$tmp/oot.ini" --plugin-dir "$tmp/plugins"
[ -d "$plugindir" ] && set -- "$@" --plugin-dir "$plugindir"
rc=0
"$bin" "$@" >"$tmp/out.txt" 2>&1 || rc=$?
[ $rc -eq 0 ] || { cat "$tmp/out.txt" >&2; fail "switchyard $* exited with $rc"; }
cat "$tmp/out.txt"

awk -v want="$tmp/plugins/oot-attn.so" '
    $1 == "attn" && $2 == "oot-attn" {
        found = 1
        if ($3 != "1.2.3" || $4 != "cpu" || $5 != "score" || $6 != "7" || $7 != want) { bad = 1; print "bad row: " $0 }
    }
    END { exit !(found && !bad) }' "$tmp/out.txt" || fail "no row \"attn oot-attn 1.2.3 cpu score 7 $tmp/plugins/oot-attn.so\""
grep -F "  $tmp/plugins/libhelper.so: not a switchyard plugin: no symbol sy_plugin_v1" "$tmp/out.txt" >/dev/null ||
    fail "the helper library is not listed as refused"
grep -F "plugin = oot-attn -> attn oot-attn 1.2.3 ($tmp/plugins/oot-attn.so)" "$tmp/out.txt" >/dev/null ||
    fail "the configuration's [attention] does not select oot-attn"
if [ -d "$plugindir" ] && ls "$plugindir"/*.so >/dev/null 2>&1; then
    awk '$1 == "device" { found = 1 } END { exit !found }' "$tmp/out.txt" ||
        fail "the installed plugins in $plugindir list no device plugin"
fi

# The plugin's declared keys are enforced for a section that selects it.
cat >"$tmp/bad.ini" <<EOF
[attention]
plugin = $tmp/plugins/oot-attn.so
colour = red
EOF
if "$bin" plugins -c "$tmp/bad.ini" --plugin-dir "$tmp/plugins" >"$tmp/bad.txt" 2>&1; then
    cat "$tmp/bad.txt" >&2
    fail "an unknown key in [attention] did not fail"
fi
grep -F "unknown key \"colour\" in [attention] at $tmp/bad.ini:3; plugin oot-attn ($tmp/plugins/oot-attn.so) accepts: greeting" \
    "$tmp/bad.txt" >/dev/null || { cat "$tmp/bad.txt" >&2; fail "the unknown-key message is not as expected"; }

# A config edit alone puts the third-party attention into the engine: the
# same greedy tokens as the in-tree cpu plugin, on the build's small model.
if [ "${1:-}" != --installed ]; then
    model=$SY_BUILDDIR/models/small
    [ -f "$model/config.json" ] || fail "the build's small model $model is missing"
    cat >"$tmp/gen.ini" <<EOF
[model]
path = $model
[device]
plugin = cpu
[attention]
plugin = oot-attn
greeting = bonjour
EOF
    plugins_dir=$SY_BUILDDIR/build-plugins
    "$bin" generate -q -c "$tmp/gen.ini" --plugin-dir "$tmp/plugins" --plugin-dir "$plugins_dir" \
        --prompt-ids 5,6,7,8,9 -n 24 --ignore-eos --print-ids >/dev/null 2>"$tmp/oot-gen.txt" ||
        { cat "$tmp/oot-gen.txt" >&2; fail "generate through oot-attn failed"; }
    # greeting is oot-attn's key: the cpu plugin refuses it, by name.
    if "$bin" generate -q -c "$tmp/gen.ini" --plugin-dir "$plugins_dir" --set attention.plugin=cpu \
        --prompt-ids 5,6,7 -n 2 >/dev/null 2>"$tmp/cpu-gen.txt"; then
        fail "the cpu attention plugin accepted oot-attn's key \"greeting\""
    fi
    grep -F 'unknown key "greeting"' "$tmp/cpu-gen.txt" >/dev/null ||
        { cat "$tmp/cpu-gen.txt" >&2; fail "the refusal of \"greeting\" does not name the key"; }
    grep -v '^greeting' "$tmp/gen.ini" >"$tmp/gen-cpu.ini"
    "$bin" generate -q -c "$tmp/gen-cpu.ini" --plugin-dir "$plugins_dir" --set attention.plugin=cpu \
        --prompt-ids 5,6,7,8,9 -n 24 --ignore-eos --print-ids >/dev/null 2>"$tmp/cpu-gen.txt" ||
        { cat "$tmp/cpu-gen.txt" >&2; fail "generate through the cpu attention failed"; }
    a=$(grep '^generated_ids:' "$tmp/oot-gen.txt")
    b=$(grep '^generated_ids:' "$tmp/cpu-gen.txt")
    [ -n "$a" ] && [ "$a" = "$b" ] || fail "oot-attn and cpu gave different tokens: [$a] vs [$b]"
    echo "oot-attn and cpu agree: $a"
fi

echo "outoftree: ok"

