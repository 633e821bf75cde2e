/*
 * JSON schema objects to GBNF (see grammar_json_schema.c): properties in
 * the declared order, the optional ones free to be left out, and extra
 * properties (additionalProperties) whose names no declared property has.
 */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_json_schema.h"
#include "util/utf8.h"

typedef struct prop {
    const char *key;
    bool required;
    sy_gbuf kv; /* "key" NAME-colon value */
} prop;

/* Code-point trie of the declared keys, for the property names an extra
 * property may not take. */
typedef struct trie {
    uint32_t cp;
    bool end;
    struct trie *child, *next;
} trie;

static void trie_free(trie *t)
{
    while (t) {
        trie *n = t->next;
        trie_free(t->child);
        free(t);
        t = n;
    }
}

static int trie_add(trie **root_children, bool *root_end, const char *key)
{
    trie **level = root_children;
    bool *end = root_end;
    size_t n = strlen(key);
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = sy_utf8_decode(key + i, n - i, &cp);
        if (!k)
            return SY_ERR_INVALID;
        i += k;
        trie *t = *level;
        while (t && t->cp != cp)
            t = t->next;
        if (!t) {
            t = calloc(1, sizeof *t);
            if (!t)
                return SY_ERR_NOMEM;
            t->cp = cp;
            t->next = *level;
            *level = t;
        }
        end = &t->end;
        level = &t->child;
    }
    *end = true;
    return SY_OK;
}

/* Rule for the rest of a key (after the opening quote) at a trie node. */
static void trie_emit(sy_gjs *c, const trie *children, bool end, const char *rule)
{
    sy_gbuf b;
    sy_gbuf_init(&b);
    int alts = 0;
    if (!end) {
        sy_gbuf_puts(&b, "\"\\\"\"");
        alts++;
    }
    sy_gcpset other = {0};
    for (const trie *t = children; t; t = t->next) {
        char *sub = sy_gjs_new_rule(c, "key");
        sy_gbuf_puts(&b, alts++ ? " | " : "");
        sy_gjson_cp_literal(&b, t->cp);
        sy_gbuf_printf(&b, " %s", sub ? sub : "");
        if (sub)
            trie_emit(c, t->child, t->end, sub);
        else
            b.oom = true;
        free(sub);
        sy_gcpset_add(&other, t->cp, t->cp);
    }
    /* A first differing character that is not an escape: an escape could
     * spell a declared key's character. */
    sy_gcpset_add(&other, 0, 0x1F);
    sy_gcpset_add(&other, '"', '"');
    sy_gcpset_add(&other, '\\', '\\');
    sy_gcpset_complement(&other);
    sy_gbuf_puts(&b, alts++ ? " | " : "");
    sy_gcpset_emit(&b, &other);
    sy_gbuf_printf(&b, " %s-char* \"\\\"\"", c->name);
    if (other.oom)
        b.oom = true;
    sy_gcpset_free(&other);
    if (b.oom)
        c->rules.oom = true;
    else
        sy_gjs_define(c, rule, b.s);
    sy_gbuf_free(&b);
}

int sy_gjs_object(sy_gjs *c, json_t *s, const char *path, sy_gbuf *out)
{
    json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required");
    json_t *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.properties: expected an object of schemas", path);
    if (req && !json_is_array(req))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.required: expected an array of property names", path);
    for (size_t i = 0; i < json_array_size(req); i++) {
        json_t *r = json_array_get(req, i);
        if (!json_is_string(r))
            return sy_err_set(c->err, SY_ERR_INVALID, "%s.required[%zu]: expected a property name (a string)", path, i);
        for (size_t j = 0; j < i; j++)
            if (json_equal(json_array_get(req, j), r))
                return sy_err_set(c->err, SY_ERR_INVALID, "%s.required[%zu]: '%s' is listed twice", path, i,
                                  json_string_value(r));
    }
    bool extras = addl ? !json_is_false(addl) : (c->flags & SY_JSON_SCHEMA_ALLOW_EXTRA) != 0;
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return sy_err_set(c->err, SY_ERR_INVALID, "%s.additionalProperties: expected a boolean or a schema", path);

    size_t n_props = json_object_size(props), n_req = json_array_size(req);
    prop *ps = calloc(n_props + n_req + 1, sizeof *ps);
    if (!ps)
        return sy_gjs_oom(c);
    size_t n = 0;
    int rc = SY_OK;
    trie *keys = NULL;
    bool empty_key = false;
    char *ppath = sy_gjs_join(path, "properties");
    char *apath = sy_gjs_join(path, "additionalProperties");
    sy_gbuf extra_value;
    sy_gbuf_init(&extra_value);
    if (!ppath || !apath)
        rc = sy_gjs_oom(c);
    /* The value of a property that only `required` names. */
    if (rc == SY_OK) {
        if (!addl || json_is_true(addl))
            sy_gbuf_printf(&extra_value, "%s-value", c->name);
        else if (json_is_object(addl))
            rc = sy_gjs_gen(c, addl, apath, &extra_value);
    }
    const char *key;
    json_t *sub;
    json_object_foreach(props, key, sub) {
        if (rc != SY_OK)
            break;
        bool required = false;
        for (size_t j = 0; j < n_req; j++)
            required |= !strcmp(json_string_value(json_array_get(req, j)), key);
        int trc = trie_add(&keys, &empty_key, key);
        if (trc != SY_OK) {
            rc = trc == SY_ERR_NOMEM ? sy_gjs_oom(c) : sy_err_set(c->err, SY_ERR_INVALID, "%s: a property name is not valid UTF-8", ppath);
            break;
        }
        if (json_is_false(sub)) {
            if (required)
                rc = sy_err_set(c->err, SY_ERR_INVALID, "%s.%s: the property is required but its schema is false",
                                ppath, key);
            continue; /* may never appear */
        }
        prop *p = &ps[n++];
        p->key = key;
        p->required = required;
        sy_gbuf_init(&p->kv);
        char *kpath = sy_gjs_join(ppath, key);
        sy_gbuf v;
        sy_gbuf_init(&v);
        rc = kpath ? sy_gjs_gen(c, sub, kpath, &v) : sy_gjs_oom(c);
        free(kpath);
        if (rc == SY_OK) {
            json_t *k = json_string(key);
            char *kt = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
            json_decref(k);
            if (!kt) {
                rc = sy_gjs_oom(c);
            } else {
                sy_gbuf_literal(&p->kv, kt, strlen(kt));
                sy_gbuf_printf(&p->kv, " %s-colon ", c->name);
                rc = v.oom ? sy_gjs_oom(c) : sy_gjs_put_ref(c, &p->kv, "val", &v);
            }
            free(kt);
        }
        sy_gbuf_free(&v);
    }
    for (size_t j = 0; j < n_req && rc == SY_OK; j++) {
        const char *rk = json_string_value(json_array_get(req, j));
        if (json_object_get(props, rk))
            continue;
        if (addl && json_is_false(addl)) {
            rc = sy_err_set(c->err, SY_ERR_INVALID, "%s.required[%zu]: '%s' is required but additionalProperties "
                                                    "is false and properties does not declare it", path, j, rk);
            break;
        }
        int trc = trie_add(&keys, &empty_key, rk);
        if (trc != SY_OK) {
            rc = trc == SY_ERR_NOMEM ? sy_gjs_oom(c) : sy_err_set(c->err, SY_ERR_INVALID, "%s.required[%zu]: not valid UTF-8", path, j);
            break;
        }
        prop *p = &ps[n++];
        p->key = rk;
        p->required = true;
        sy_gbuf_init(&p->kv);
        json_t *k = json_string(rk);
        char *kt = k ? json_dumps(k, JSON_ENCODE_ANY) : NULL;
        json_decref(k);
        if (!kt) {
            rc = sy_gjs_oom(c);
            break;
        }
        sy_gbuf_literal(&p->kv, kt, strlen(kt));
        sy_gbuf_printf(&p->kv, " %s-colon %s", c->name, extra_value.s ? extra_value.s : "");
        free(kt);
    }

    /* An extra property: a name no declared property has, then its value. */
    sy_gbuf extra_kv;
    sy_gbuf_init(&extra_kv);
    if (rc == SY_OK && extras) {
        sy_gbuf vref;
        sy_gbuf_init(&vref);
        rc = sy_gjs_put_ref(c, &vref, "val", &extra_value);
        if (rc == SY_OK && (keys || empty_key)) {
            char *kr = sy_gjs_new_rule(c, "key");
            if (!kr) {
                rc = sy_gjs_oom(c);
            } else {
                trie_emit(c, keys, empty_key, kr);
                sy_gbuf_printf(&extra_kv, "\"\\\"\" %s %s-colon %s", kr, c->name, vref.s);
            }
            free(kr);
        } else if (rc == SY_OK) {
            sy_gbuf_printf(&extra_kv, "%s-string %s-colon %s", c->name, c->name, vref.s);
        }
        sy_gbuf_free(&vref);
    }

    /*
     * Properties come in the declared order, each optional one may be left
     * out. rest[i]: what follows once something was written and properties
     * i.. remain (each behind a comma); first[i]: the non-empty ways to
     * start with properties i.., written as rules from the back.
     */
    char **rest = calloc(n + 1, sizeof *rest), **first = calloc(n + 1, sizeof *first);
    if (rc == SY_OK && (!rest || !first))
        rc = sy_gjs_oom(c);
    if (rc == SY_OK && extras) {
        rest[n] = sy_gjs_new_rule(c, "rest");
        first[n] = n == 0 || !ps[n - 1].required ? sy_gjs_new_rule(c, "first") : NULL;
        if (!rest[n] || (!first[n] && (n == 0 || !ps[n - 1].required))) {
            rc = sy_gjs_oom(c);
        } else {
            sy_gbuf b;
            sy_gbuf_init(&b);
            sy_gbuf_printf(&b, "(%s-comma %s)*", c->name, extra_kv.s);
            sy_gjs_define(c, rest[n], b.s);
            sy_gbuf_free(&b);
            if (first[n]) {
                sy_gbuf_init(&b);
                sy_gbuf_printf(&b, "%s %s", extra_kv.s, rest[n]);
                sy_gjs_define(c, first[n], b.s);
                sy_gbuf_free(&b);
            }
        }
    }
    bool all_optional = true;
    for (size_t i = n; i-- > 0 && rc == SY_OK;) {
        sy_gbuf b;
        all_optional &= !ps[i].required;
        if (i >= 1) {
            rest[i] = sy_gjs_new_rule(c, "rest");
            if (!rest[i]) {
                rc = sy_gjs_oom(c);
                break;
            }
            sy_gbuf_init(&b);
            sy_gbuf_printf(&b, ps[i].required ? "%s-comma %s" : "(%s-comma %s)?", c->name, ps[i].kv.s);
            if (rest[i + 1])
                sy_gbuf_printf(&b, " %s", rest[i + 1]);
            sy_gjs_define(c, rest[i], b.s);
            sy_gbuf_free(&b);
        }
        /* first[i] is used by first[i-1] only when property i-1 is optional. */
        if (i > 0 && ps[i - 1].required)
            continue;
        first[i] = sy_gjs_new_rule(c, "first");
        if (!first[i]) {
            rc = sy_gjs_oom(c);
            break;
        }
        sy_gbuf_init(&b);
        sy_gbuf_puts(&b, ps[i].kv.s);
        if (rest[i + 1])
            sy_gbuf_printf(&b, " %s", rest[i + 1]);
        if (!ps[i].required && first[i + 1])
            sy_gbuf_printf(&b, " | %s", first[i + 1]);
        sy_gjs_define(c, first[i], b.s);
        sy_gbuf_free(&b);
    }
    if (rc == SY_OK) {
        char *r = sy_gjs_new_rule(c, "obj");
        if (!r) {
            rc = sy_gjs_oom(c);
        } else {
            sy_gbuf b;
            sy_gbuf_init(&b);
            if (!first[0])
                sy_gbuf_puts(&b, "\"{\" \"}\"");
            else
                sy_gbuf_printf(&b, all_optional ? "\"{\" %s? \"}\"" : "\"{\" %s \"}\"", first[0]);
            sy_gjs_define(c, r, b.s);
            sy_gbuf_free(&b);
            sy_gbuf_puts(out, r);
        }
        free(r);
    }
    for (size_t i = 0; i <= n && rest && first; i++) {
        free(rest[i]);
        free(first[i]);
    }
    free(rest);
    free(first);
    for (size_t i = 0; i < n; i++)
        sy_gbuf_free(&ps[i].kv);
    free(ps);
    trie_free(keys);
    free(ppath);
    free(apath);
    sy_gbuf_free(&extra_value);
    sy_gbuf_free(&extra_kv);
    return rc;
}

