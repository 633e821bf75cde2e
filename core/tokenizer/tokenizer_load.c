/*
 * Loading: tokenizer.json (model, normalizer, pre-tokenizer, added tokens,
 * decoder, post-processor) and, for a directory, tokenizer_config.json
 * (add_bos_token / add_eos_token, bos/eos token strings) plus config.json
 * and generation_config.json (bos_token_id, eos_token_id).
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tokenizer/tok_internal.h"
#include "util/log.h"
#include "util/util.h"

int sy__arena_add(sy_tokenizer *t, const char *s, size_t len, uint32_t *off)
{
    if (t->arena.len + len + 1 > UINT32_MAX)
        return SY_ERR_NOMEM;
    *off = (uint32_t)t->arena.len;
    if (sy__buf_put(&t->arena, s, len))
        return SY_ERR_NOMEM;
    /* Keep every piece NUL-terminated for sy_tokenizer_piece. */
    t->arena.len++;
    return 0;
}

int sy__set_piece(sy_tokenizer *t, int32_t id, uint32_t off, uint32_t len)
{
    if ((size_t)id >= t->ids_cap) {
        /* Geometric growth: ids mostly arrive in increasing order. */
        size_t cap = t->ids_cap ? t->ids_cap : 1024;
        while (cap <= (size_t)id)
            cap *= 2;
        uint32_t *po = realloc(t->piece_off, cap * sizeof *po);
        if (!po)
            return SY_ERR_NOMEM;
        t->piece_off = po;
        uint32_t *pl = realloc(t->piece_len, cap * sizeof *pl);
        if (!pl)
            return SY_ERR_NOMEM;
        t->piece_len = pl;
        uint8_t *fl = realloc(t->id_flags, cap);
        if (!fl)
            return SY_ERR_NOMEM;
        t->id_flags = fl;
        for (size_t i = t->ids_cap; i < cap; i++) {
            t->piece_off[i] = UINT32_MAX;
            t->piece_len[i] = 0;
            t->id_flags[i] = 0;
        }
        t->ids_cap = cap;
    }
    if (id >= t->n_ids)
        t->n_ids = id + 1;
    /* The first piece seen for an id is the one it decodes to. */
    if (t->piece_off[id] == UINT32_MAX) {
        t->piece_off[id] = off;
        t->piece_len[id] = len;
    }
    return 0;
}

void sy_tokenizer_free(sy_tokenizer *t)
{
    if (!t)
        return;
    sy__bpe_free(t);
    sy__added_free(t);
    sy__norm_free(t->norm);
    sy__pretok_free(t->pretok);
    sy__dec_free(t->dec);
    sy__smap_free(&t->vocab);
    sy__smap_free(&t->added_map);
    sy__buf_free(&t->arena);
    free(t->piece_off);
    free(t->piece_len);
    free(t->id_flags);
    sy__ivec_free(&t->add_pre);
    sy__ivec_free(&t->add_post);
    sy__ivec_free(&t->eos);
    free(t);
}

static int sy__load_json(const char *path, json_t **out, sy_err *err)
{
    char *data;
    size_t len;
    int rc = sy_read_file(path, &data, &len, err);
    if (rc)
        return rc;
    json_error_t je;
    *out = json_loadb(data, len, JSON_ALLOW_NUL, &je);
    free(data);
    if (!*out)
        return sy_err_set(err, SY_ERR_INVALID, "%s:%d:%d: expected valid JSON: %s", path, je.line, je.column, je.text);
    return 0;
}

static int sy__special_ids(const sy_tokenizer *t, const json_t *specials, const char *name, sy_tok_ivec *out,
                           const sy_tok_where *w, sy_err *err)
{
    /* TemplateProcessing's special_tokens: name -> {"ids": [...]}; a name
     * missing there is looked up as a token. */
    const json_t *sp = json_object_get(specials, name);
    const json_t *ids = json_object_get(sp, "ids");
    if (json_is_array(ids)) {
        for (size_t i = 0; i < json_array_size(ids); i++) {
            const json_t *v = json_array_get(ids, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= t->n_ids) {
                char sub[160];
                snprintf(sub, sizeof sub, ".special_tokens[\"%s\"].ids[%zu]", name, i);
                return sy__json_err(err, w, sub, "a token id of this tokenizer", v);
            }
            if (sy__ivec_push(out, (int32_t)json_integer_value(v)))
                return SY_ERR_NOMEM;
        }
        return 0;
    }
    int32_t id = sy_tokenizer_token_id(t, name);
    if (id < 0)
        return sy_err_set(err, SY_ERR_INVALID,
                          "%s: %s: expected special token \"%s\" in special_tokens or the vocabulary, found neither",
                          w->file, w->path, name);
    return sy__ivec_push(out, id);
}

/* What one post-processor adds before and after the sequence. */
static int sy__post_parse(sy_tokenizer *t, const json_t *j, const sy_tok_where *w, sy_tok_ivec *pre, sy_tok_ivec *post,
                          sy_err *err)
{
    if (!j || json_is_null(j))
        return 0;
    const char *ty;
    int rc = sy__json_type(j, NULL, "a post-processor type string", w, &ty, err);
    if (rc)
        return rc;
    if (!strcmp(ty, "ByteLevel"))
        return 0;
    if (!strcmp(ty, "TemplateProcessing")) {
        const json_t *single = json_object_get(j, "single");
        const json_t *specials = json_object_get(j, "special_tokens");
        if (!json_is_array(single))
            return sy__json_err(err, w, ".single", "an array of template items", single);
        bool seen_a = false;
        for (size_t i = 0; i < json_array_size(single); i++) {
            const json_t *it = json_array_get(single, i);
            const json_t *st = json_object_get(it, "SpecialToken"), *sq = json_object_get(it, "Sequence");
            sy_tok_where sub = *w;
            sy__path(sub.path, sizeof sub.path, w->path, ".single[%zu]", i);
            if (json_is_object(sq)) {
                if (seen_a)
                    return sy_err_set(err, SY_ERR_UNSUPPORTED,
                                      "%s: %s: expected one $A sequence in the single template, found another", w->file,
                                      sub.path);
                seen_a = true;
            } else if (json_is_object(st) && json_is_string(json_object_get(st, "id"))) {
                if ((rc = sy__special_ids(t, specials, json_string_value(json_object_get(st, "id")),
                                          seen_a ? post : pre, w, err)))
                    return rc;
            } else {
                return sy__json_err(err, &sub, "", "{\"SpecialToken\": {\"id\": ...}} or {\"Sequence\": ...}", it);
            }
        }
        return 0;
    }
    if (!strcmp(ty, "RobertaProcessing") || !strcmp(ty, "BertProcessing")) {
        const json_t *cls = json_object_get(j, "cls"), *sep = json_object_get(j, "sep");
        if (!json_is_array(cls) || !json_is_integer(json_array_get(cls, 1)))
            return sy__json_err(err, w, ".cls", "[token, id]", cls);
        if (!json_is_array(sep) || !json_is_integer(json_array_get(sep, 1)))
            return sy__json_err(err, w, ".sep", "[token, id]", sep);
        if (sy__ivec_push(pre, (int32_t)json_integer_value(json_array_get(cls, 1))) ||
            sy__ivec_push(post, (int32_t)json_integer_value(json_array_get(sep, 1))))
            return SY_ERR_NOMEM;
        return 0;
    }
    if (!strcmp(ty, "Sequence")) {
        const json_t *procs = json_object_get(j, "processors");
        if (!json_is_array(procs))
            return sy__json_err(err, w, ".processors", "an array of post-processors", procs);
        for (size_t i = 0; i < json_array_size(procs); i++) {
            /* Each processor wraps what the previous ones produced. */
            sy_tok_ivec p2 = {0}, q2 = {0};
            sy_tok_where sub = *w;
            sy__path(sub.path, sizeof sub.path, w->path, ".processors[%zu]", i);
            rc = sy__post_parse(t, json_array_get(procs, i), &sub, &p2, &q2, err);
            for (size_t k = 0; !rc && k < pre->n; k++)
                rc = sy__ivec_push(&p2, pre->v[k]);
            for (size_t k = 0; !rc && k < q2.n; k++)
                rc = sy__ivec_push(post, q2.v[k]);
            if (!rc) {
                sy__ivec_free(pre);
                *pre = p2;
            } else {
                sy__ivec_free(&p2);
            }
            sy__ivec_free(&q2);
            if (rc)
                return rc;
        }
        return 0;
    }
    return sy__json_unknown_type(err, w, "post-processor",
                                 "TemplateProcessing, ByteLevel, RobertaProcessing, BertProcessing, Sequence", ty);
}

static int sy__parse_tokenizer_json(sy_tokenizer *t, const json_t *root, const char *file, sy_err *err)
{
    sy_tok_where w = {.file = file, .path = ""};
    if (!json_is_object(root))
        return sy__json_err(err, &w, "(top level)", "a tokenizer object", root);
    const json_t *model = json_object_get(root, "model");
    int rc;
    snprintf(w.path, sizeof w.path, "model");
    if (!model || !json_is_object(model))
        return sy__json_err(err, &w, "", "a model object", model);
    if (sy__smap_init(&t->added_map, &t->arena, 16))
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    if ((rc = sy__bpe_parse(t, model, &w, err)))
        return rc;
    snprintf(w.path, sizeof w.path, "normalizer");
    if ((rc = sy__norm_parse(json_object_get(root, "normalizer"), &w, &t->norm, err)))
        return rc;
    snprintf(w.path, sizeof w.path, "pre_tokenizer");
    if ((rc = sy__pretok_parse(json_object_get(root, "pre_tokenizer"), &w, &t->pretok, err)))
        return rc;
    snprintf(w.path, sizeof w.path, "added_tokens");
    if ((rc = sy__added_parse(t, json_object_get(root, "added_tokens"), &w, err)))
        return rc;
    snprintf(w.path, sizeof w.path, "decoder");
    if ((rc = sy__dec_parse(t, json_object_get(root, "decoder"), &w, err)))
        return rc;
    snprintf(w.path, sizeof w.path, "post_processor");
    if ((rc = sy__post_parse(t, json_object_get(root, "post_processor"), &w, &t->add_pre, &t->add_post, err)))
        return rc == SY_ERR_NOMEM ? sy_err_set(err, rc, "out of memory") : rc;
    return 0;
}

static sy_tokenizer *sy__tok_new(void)
{
    sy_tokenizer *t = calloc(1, sizeof *t);
    if (t) {
        t->bos = -1;
        t->unk_id = -1;
    }
    return t;
}

static int sy__load_file(const char *path, sy_tokenizer **out, sy_err *err)
{
    *out = NULL;
    json_t *root;
    int rc = sy__load_json(path, &root, err);
    if (rc)
        return rc;
    sy_tokenizer *t = sy__tok_new();
    if (!t) {
        json_decref(root);
        return sy_err_set(err, SY_ERR_NOMEM, "out of memory");
    }
    rc = sy__parse_tokenizer_json(t, root, path, err);
    json_decref(root);
    if (rc) {
        sy_tokenizer_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

/* A token given as "text" or {"content": "text"} in tokenizer_config. */
static const char *sy__token_text(const json_t *v)
{
    if (json_is_string(v))
        return json_string_value(v);
    if (json_is_object(v) && json_is_string(json_object_get(v, "content")))
        return json_string_value(json_object_get(v, "content"));
    return NULL;
}

static int sy__push_unique(sy_tok_ivec *v, int32_t id)
{
    for (size_t i = 0; i < v->n; i++)
        if (v->v[i] == id)
            return 0;
    return sy__ivec_push(v, id);
}

/* eos_token_id / bos_token_id of config.json or generation_config.json:
 * an integer or a list of them. */
static int sy__config_ids(sy_tokenizer *t, const json_t *cfg, const char *key, const char *file, sy_tok_ivec *out)
{
    const json_t *v = json_object_get(cfg, key);
    if (!v || json_is_null(v))
        return 0;
    size_t n = json_is_array(v) ? json_array_size(v) : 1;
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_is_array(v) ? json_array_get(v, i) : v;
        if (!json_is_integer(e) || json_integer_value(e) < 0 || json_integer_value(e) >= t->n_ids) {
            char what[128];
            sy__json_describe(e, what, sizeof what);
            sy_warn("%s: %s: expected a token id below %d, found %s; ignored", file, key, t->n_ids, what);
            continue;
        }
        if (sy__push_unique(out, (int32_t)json_integer_value(e)))
            return SY_ERR_NOMEM;
    }
    return 0;
}

static int sy__load_companions(sy_tokenizer *t, const char *dir, sy_err *err)
{
    char path[4096];
    json_t *tc = NULL, *gc = NULL, *mc = NULL;
    int rc = 0;
    if (!sy_path_join(path, sizeof path, dir, "tokenizer_config.json") && sy_file_exists(path) &&
        (rc = sy__load_json(path, &tc, err)))
        goto out;
    if (!sy_path_join(path, sizeof path, dir, "generation_config.json") && sy_file_exists(path) &&
        (rc = sy__load_json(path, &gc, err)))
        goto out;
    if (!sy_path_join(path, sizeof path, dir, "config.json") && sy_file_exists(path) &&
        (rc = sy__load_json(path, &mc, err)))
        goto out;
    sy_tok_ivec bos = {0};
    const char *bos_text = sy__token_text(json_object_get(tc, "bos_token"));
    const char *eos_text = sy__token_text(json_object_get(tc, "eos_token"));
    int32_t bos_tc = bos_text ? sy_tokenizer_token_id(t, bos_text) : -1;
    int32_t eos_tc = eos_text ? sy_tokenizer_token_id(t, eos_text) : -1;
    if ((bos_text && bos_tc < 0) || (eos_text && eos_tc < 0))
        sy_warn("%s/tokenizer_config.json: %s \"%s\" is not a token of tokenizer.json; ignored", dir,
                bos_text && bos_tc < 0 ? "bos_token" : "eos_token", bos_text && bos_tc < 0 ? bos_text : eos_text);
    if (bos_tc >= 0)
        rc = sy__ivec_push(&bos, bos_tc);
    if (!rc)
        rc = sy__config_ids(t, gc, "bos_token_id", "generation_config.json", &bos);
    if (!rc)
        rc = sy__config_ids(t, mc, "bos_token_id", "config.json", &bos);
    if (!rc && bos.n)
        t->bos = bos.v[0];
    sy__ivec_free(&bos);
    /* EOS: generation_config first (what generation stops on), then
     * config.json, then the tokenizer's own eos_token. */
    if (!rc)
        rc = sy__config_ids(t, gc, "eos_token_id", "generation_config.json", &t->eos);
    if (!rc)
        rc = sy__config_ids(t, mc, "eos_token_id", "config.json", &t->eos);
    if (!rc && eos_tc >= 0)
        rc = sy__push_unique(&t->eos, eos_tc);
    if (rc) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory");
        goto out;
    }
    /* transformers' Llama-style tokenizers rebuild the post-processor from
     * add_bos_token / add_eos_token; an absent flag keeps what the
     * tokenizer.json template does. */
    const json_t *ab = json_object_get(tc, "add_bos_token"), *ae = json_object_get(tc, "add_eos_token");
    if (json_is_boolean(ab) || json_is_boolean(ae)) {
        bool add_bos = json_is_boolean(ab) ? json_is_true(ab) : t->add_pre.n > 0;
        bool add_eos = json_is_boolean(ae) ? json_is_true(ae) : t->add_post.n > 0;
        int32_t eos_id = eos_tc >= 0 ? eos_tc : t->eos.n ? t->eos.v[0] : -1;
        if ((add_bos && t->bos < 0) || (add_eos && eos_id < 0)) {
            rc = sy_err_set(err, SY_ERR_INVALID,
                            "%s/tokenizer_config.json: %s: expected a %s token to add, found none in "
                            "tokenizer_config.json, generation_config.json or config.json",
                            dir, add_bos && t->bos < 0 ? "add_bos_token" : "add_eos_token",
                            add_bos && t->bos < 0 ? "BOS" : "EOS");
            goto out;
        }
        t->add_pre.n = t->add_post.n = 0;
        if ((add_bos && sy__ivec_push(&t->add_pre, t->bos)) || (add_eos && sy__ivec_push(&t->add_post, eos_id))) {
            rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory");
            goto out;
        }
    }
out:
    json_decref(tc);
    json_decref(gc);
    json_decref(mc);
    return rc;
}

int sy_tokenizer_load_file(const char *path, sy_tokenizer **out, sy_err *err)
{
    int rc = sy__load_file(path, out, err);
    if (rc)
        return rc;
    sy_tokenizer *t = *out;
    /* The template's first special token is the BOS it would add, but a
     * lone tokenizer.json adds nothing (the interface promises so). */
    if (t->add_pre.n)
        t->bos = t->add_pre.v[0];
    t->add_pre.n = t->add_post.n = 0;
    return 0;
}

int sy_tokenizer_load_dir(const char *dir, sy_tokenizer **out, sy_err *err)
{
    char path[4096];
    *out = NULL;
    if (sy_path_join(path, sizeof path, dir, "tokenizer.json"))
        return sy_err_set(err, SY_ERR_INVALID, "tokenizer directory path too long: %s", dir);
    if (!sy_file_exists(path))
        return sy_err_set(err, SY_ERR_IO, "%s: expected a tokenizer.json in the model directory, found none", path);
    sy_tokenizer *t;
    int rc = sy__load_file(path, &t, err);
    if (rc)
        return rc;
    if ((rc = sy__load_companions(t, dir, err))) {
        sy_tokenizer_free(t);
        return rc;
    }
    if (t->bos < 0 && t->add_pre.n)
        t->bos = t->add_pre.v[0];
    *out = t;
    return 0;
}

/* ------------------------------------------------------------ accessors */

int32_t sy_tokenizer_vocab_size(const sy_tokenizer *t) { return t->n_ids; }

int32_t sy_tokenizer_bos(const sy_tokenizer *t) { return t->bos; }

size_t sy_tokenizer_eos(const sy_tokenizer *t, const int32_t **ids)
{
    *ids = t->eos.v;
    return t->eos.n;
}

bool sy_tokenizer_is_special(const sy_tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_ids && (t->id_flags[id] & SY__ID_SPECIAL);
}

const char *sy_tokenizer_piece(const sy_tokenizer *t, int32_t id)
{
    if (id < 0 || id >= t->n_ids || t->piece_off[id] == UINT32_MAX)
        return NULL;
    return t->arena.p + t->piece_off[id];
}

int32_t sy_tokenizer_token_id(const sy_tokenizer *t, const char *piece)
{
    size_t n = strlen(piece);
    /* Added tokens first, as Hugging Face's token_to_id does. */
    int32_t id = sy__smap_get(&t->added_map, piece, n);
    return id >= 0 ? id : sy__smap_get(&t->vocab, piece, n);
}
