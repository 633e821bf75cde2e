/*
 * A GPT-2 style byte-level BPE tokenizer (tokenizer.json and
 * tokenizer_config.json), learned here by plain BPE training on the built-in
 * text (corpus.c):
 *
 *   ids 0..255            the 256 bytes (id = byte value), spelled in GPT-2's
 *                         byte-to-unicode alphabet
 *   ids 256..V-4          merges, in the order they were learned
 *   V-3, V-2, V-1         <|endoftext|> (eos), <|im_start|>, <|im_end|>
 *
 * Training: pre-tokenize with the GPT-2 split regex, then repeatedly merge
 * the most frequent adjacent pair (ties: the lowest pair of ids), as
 * Hugging Face's BpeTrainer does. When the text has no pair left before the
 * vocabulary is full (large vocabularies), the rest is filled with merges of
 * two learned letter tokens (" the" + "re" -> " there") taken in id order:
 * valid, decodable, and still only letter runs, as the split regex makes.
 */
#include "config.h"

#include "mkmodel.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdlib.h>
#include <string.h>

static const char gpt2_split_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

static const char *const special_tokens[3] = {"<|endoftext|>", "<|im_start|>", "<|im_end|>"};

static const char chatml_template[] =
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

/* ---- a byte-string -> int map (open addressing; keys are borrowed) ---- */
typedef struct strmap {
    const unsigned char **key;
    size_t *klen;
    int *val;
    size_t cap, n;
} strmap;

static uint64_t hash_bytes(const unsigned char *p, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static int strmap_init(strmap *m, size_t cap)
{
    size_t c = 64;
    while (c < cap * 2)
        c *= 2;
    m->key = calloc(c, sizeof(*m->key));
    m->klen = calloc(c, sizeof(*m->klen));
    m->val = calloc(c, sizeof(*m->val));
    m->cap = c;
    m->n = 0;
    return (m->key && m->klen && m->val) ? 0 : -1;
}

static void strmap_free(strmap *m)
{
    free(m->key);
    free(m->klen);
    free(m->val);
}

static size_t strmap_slot(const strmap *m, const unsigned char *k, size_t n)
{
    size_t i = (size_t)hash_bytes(k, n) & (m->cap - 1);
    while (m->key[i] && !(m->klen[i] == n && memcmp(m->key[i], k, n) == 0))
        i = (i + 1) & (m->cap - 1);
    return i;
}

/* -1 when absent. */
static int strmap_get(const strmap *m, const unsigned char *k, size_t n)
{
    size_t i = strmap_slot(m, k, n);
    return m->key[i] ? m->val[i] : -1;
}

static int strmap_put(strmap *m, const unsigned char *k, size_t n, int v)
{
    if ((m->n + 1) * 2 > m->cap) {
        strmap old = *m;
        if (strmap_init(m, old.cap) != 0) {
            strmap_free(m);
            *m = old;
            return -1;
        }
        for (size_t i = 0; i < old.cap; i++)
            if (old.key[i]) {
                size_t j = strmap_slot(m, old.key[i], old.klen[i]);
                m->key[j] = old.key[i];
                m->klen[j] = old.klen[i];
                m->val[j] = old.val[i];
                m->n++;
            }
        strmap_free(&old);
    }
    size_t i = strmap_slot(m, k, n);
    if (!m->key[i])
        m->n++;
    m->key[i] = k;
    m->klen[i] = n;
    m->val[i] = v;
    return 0;
}

/* ---- the vocabulary being built ---- */
typedef struct tok {
    unsigned char *bytes;
    size_t len;
} tok;

typedef struct bpe {
    tok *toks;
    size_t ntok, captok;
    int (*merges)[2];
    size_t nmerge, capmerge;
    strmap index; /* bytes -> id */
} bpe;

/* Id of a+b, adding the token when new; records the merge. -1: no memory. */
static int bpe_merge(bpe *b, int x, int y)
{
    size_t len = b->toks[x].len + b->toks[y].len;
    unsigned char *s = malloc(len);
    if (!s)
        return -1;
    memcpy(s, b->toks[x].bytes, b->toks[x].len);
    memcpy(s + b->toks[x].len, b->toks[y].bytes, b->toks[y].len);
    int id = strmap_get(&b->index, s, len);
    if (id < 0) {
        if (b->ntok == b->captok) {
            size_t cap = b->captok * 2;
            tok *t = realloc(b->toks, cap * sizeof(*t));
            if (!t) {
                free(s);
                return -1;
            }
            b->toks = t;
            b->captok = cap;
        }
        id = (int)b->ntok;
        b->toks[b->ntok].bytes = s;
        b->toks[b->ntok].len = len;
        b->ntok++;
        if (strmap_put(&b->index, s, len, id) != 0)
            return -1;
    } else {
        free(s); /* a second way to spell a token: Hugging Face keeps both merges too */
    }
    if (b->nmerge == b->capmerge) {
        size_t cap = b->capmerge ? b->capmerge * 2 : 1024;
        int(*m)[2] = realloc(b->merges, cap * sizeof(*m));
        if (!m)
            return -1;
        b->merges = m;
        b->capmerge = cap;
    }
    b->merges[b->nmerge][0] = x;
    b->merges[b->nmerge][1] = y;
    b->nmerge++;
    return id;
}

static void bpe_free(bpe *b)
{
    for (size_t i = 0; i < b->ntok; i++)
        free(b->toks[i].bytes);
    free(b->toks);
    free(b->merges);
    strmap_free(&b->index);
}

/* ---- training ---- */
typedef struct word {
    int *sym;
    size_t len;
    long count;
} word;

typedef struct pairmap {
    uint64_t *key; /* (a << 32 | b) + 1; 0 = empty */
    long *count;
    size_t cap;
} pairmap;

static size_t pair_slot(const pairmap *p, uint64_t k)
{
    size_t i = (size_t)((k * 0x9e3779b97f4a7c15ull) >> 20) & (p->cap - 1);
    while (p->key[i] && p->key[i] != k)
        i = (i + 1) & (p->cap - 1);
    return i;
}

/* Splits the corpus with the GPT-2 regex into distinct words with counts. */
static int pretokenize(word **out, size_t *nout, char *err, size_t errcap)
{
    int ec;
    PCRE2_SIZE eo;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)gpt2_split_regex, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &ec,
                                   &eo, NULL);
    if (!re) {
        snprintf(err, errcap, "PCRE2 cannot compile the GPT-2 split regex (error %d at %zu)", ec, (size_t)eo);
        return -1;
    }
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    const unsigned char *text = (const unsigned char *)mk_corpus_text;
    size_t len = strlen(mk_corpus_text);
    strmap seen = {0};
    word *w = NULL;
    size_t nw = 0, capw = 0;
    int rc = (md && strmap_init(&seen, 1024) == 0) ? 0 : -1;
    size_t off = 0;
    while (rc == 0 && off < len) {
        int m = pcre2_match(re, text, len, off, 0, md, NULL);
        if (m < 0)
            break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        if (ov[1] <= ov[0]) { /* the regex has no empty match; be safe */
            off++;
            continue;
        }
        const unsigned char *s = text + ov[0];
        size_t n = ov[1] - ov[0];
        off = ov[1];
        int id = strmap_get(&seen, s, n);
        if (id >= 0) {
            w[id].count++;
            continue;
        }
        if (nw == capw) {
            capw = capw ? capw * 2 : 512;
            word *nwp = realloc(w, capw * sizeof(*w));
            if (!nwp) {
                rc = -1;
                break;
            }
            w = nwp;
        }
        w[nw].sym = malloc(n * sizeof(int));
        if (!w[nw].sym || strmap_put(&seen, s, n, (int)nw) != 0) {
            free(w[nw].sym);
            rc = -1;
            break;
        }
        for (size_t i = 0; i < n; i++)
            w[nw].sym[i] = s[i];
        w[nw].len = n;
        w[nw].count = 1;
        nw++;
    }
    strmap_free(&seen);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    if (rc != 0) {
        for (size_t i = 0; i < nw; i++)
            free(w[i].sym);
        free(w);
        snprintf(err, errcap, "out of memory splitting the training text");
        return -1;
    }
    *out = w;
    *nout = nw;
    return 0;
}

/* Learns merges until b has `target` tokens or no pair is left. */
static int train(bpe *b, size_t target, char *err, size_t errcap)
{
    word *w;
    size_t nw;
    if (pretokenize(&w, &nw, err, errcap) != 0)
        return -1;
    size_t nsym = 0;
    for (size_t i = 0; i < nw; i++)
        nsym += w[i].len;
    pairmap pm = {0};
    pm.cap = 64;
    while (pm.cap < nsym * 2)
        pm.cap *= 2;
    pm.key = malloc(pm.cap * sizeof(*pm.key));
    pm.count = malloc(pm.cap * sizeof(*pm.count));
    int rc = (pm.key && pm.count) ? 0 : -1;
    while (rc == 0 && b->ntok < target) {
        memset(pm.key, 0, pm.cap * sizeof(*pm.key));
        uint64_t best = 0;
        long best_count = 0;
        for (size_t i = 0; i < nw; i++)
            for (size_t j = 0; j + 1 < w[i].len; j++) {
                uint64_t k = (((uint64_t)(uint32_t)w[i].sym[j] << 32) | (uint32_t)w[i].sym[j + 1]) + 1;
                size_t s = pair_slot(&pm, k);
                if (!pm.key[s]) {
                    pm.key[s] = k;
                    pm.count[s] = 0;
                }
                pm.count[s] += w[i].count;
                if (pm.count[s] > best_count || (pm.count[s] == best_count && k < best)) {
                    best = k;
                    best_count = pm.count[s];
                }
            }
        if (best_count == 0)
            break; /* every word is one token */
        int x = (int)((best - 1) >> 32), y = (int)((best - 1) & 0xffffffffu);
        int id = bpe_merge(b, x, y);
        if (id < 0) {
            rc = -1;
            break;
        }
        for (size_t i = 0; i < nw; i++) {
            size_t o = 0;
            for (size_t j = 0; j < w[i].len; j++) {
                if (j + 1 < w[i].len && w[i].sym[j] == x && w[i].sym[j + 1] == y) {
                    w[i].sym[o++] = id;
                    j++;
                } else {
                    w[i].sym[o++] = w[i].sym[j];
                }
            }
            w[i].len = o;
        }
    }
    for (size_t i = 0; i < nw; i++)
        free(w[i].sym);
    free(w);
    free(pm.key);
    free(pm.count);
    if (rc != 0)
        snprintf(err, errcap, "out of memory training the tokenizer");
    return rc;
}

static int is_letter(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

/* 1 when t is letters, after one optional leading space (only if lead_ok). */
static int letter_run(const tok *t, int lead_ok)
{
    size_t i = (lead_ok && t->len > 1 && t->bytes[0] == ' ') ? 1 : 0;
    if (i >= t->len)
        return 0;
    for (; i < t->len; i++)
        if (!is_letter(t->bytes[i]))
            return 0;
    return 1;
}

/* Fills the vocabulary up to target with merges of letter tokens. */
static int fill(bpe *b, size_t target, char *err, size_t errcap)
{
    while (b->ntok < target) {
        size_t ntok0 = b->ntok;
        int *A = malloc(b->ntok * sizeof(int)), *B = malloc(b->ntok * sizeof(int));
        size_t na = 0, nb = 0;
        if (!A || !B) {
            free(A);
            free(B);
            snprintf(err, errcap, "out of memory filling the vocabulary");
            return -1;
        }
        for (size_t i = 0; i < b->ntok; i++) {
            if (letter_run(&b->toks[i], 1))
                A[na++] = (int)i;
            if (letter_run(&b->toks[i], 0))
                B[nb++] = (int)i;
        }
        int rc = 0;
        /* Diagonals i + j = d, so early (short, frequent) tokens pair first. */
        for (size_t d = 0; d + 2 <= na + nb && b->ntok < target && rc == 0; d++) {
            size_t i0 = d >= nb ? d - nb + 1 : 0;
            for (size_t i = i0; i <= d && i < na && b->ntok < target; i++) {
                const tok *x = &b->toks[A[i]], *y = &b->toks[B[d - i]];
                unsigned char s[512];
                if (x->len + y->len > sizeof(s))
                    continue;
                memcpy(s, x->bytes, x->len);
                memcpy(s + x->len, y->bytes, y->len);
                if (strmap_get(&b->index, s, x->len + y->len) >= 0)
                    continue;
                if (bpe_merge(b, A[i], B[d - i]) < 0) {
                    rc = -1;
                    break;
                }
            }
        }
        free(A);
        free(B);
        if (rc != 0) {
            snprintf(err, errcap, "out of memory filling the vocabulary");
            return -1;
        }
        if (b->ntok == ntok0) {
            snprintf(err, errcap, "cannot fill a vocabulary of %zu tokens", target + 3);
            return -1;
        }
    }
    return 0;
}

/* ---- output ---- */

/* GPT-2's bytes_to_unicode: printable bytes stand for themselves, the
 * others for U+0100 onwards, in byte order. */
static void byte_alphabet(unsigned cp[256])
{
    unsigned next = 256;
    for (unsigned c = 0; c < 256; c++) {
        int printable = (c >= '!' && c <= '~') || (c >= 0xa1 && c <= 0xac) || (c >= 0xae);
        cp[c] = printable ? c : next++;
    }
}

/* The token's bytes spelled in the byte alphabet, UTF-8, NUL-terminated. */
static char *spell(const tok *t, const unsigned cp[256])
{
    char *s = malloc(t->len * 2 + 1), *o = s;
    if (!s)
        return NULL;
    for (size_t i = 0; i < t->len; i++) {
        unsigned c = cp[t->bytes[i]];
        if (c < 0x80) {
            *o++ = (char)c;
        } else {
            *o++ = (char)(0xc0 | (c >> 6));
            *o++ = (char)(0x80 | (c & 0x3f));
        }
    }
    *o = '\0';
    return s;
}

static json_t *added_token(int id, const char *content)
{
    return json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", id, "content", content, "single_word", 0, "lstrip", 0,
                     "rstrip", 0, "normalized", 0, "special", 1);
}

static json_t *tokenizer_json(const bpe *b, const mk_spec *s)
{
    unsigned cp[256];
    byte_alphabet(cp);
    const int first_special = mk_eos_id(s);
    int oom = 0;
    char **sp = calloc(b->ntok, sizeof(char *));
    json_t *vocab = json_object(), *merges = json_array(), *added = json_array();
    if (!sp || !vocab || !merges || !added)
        oom = 1;
    for (size_t i = 0; i < b->ntok && !oom; i++) {
        sp[i] = spell(&b->toks[i], cp);
        if (!sp[i] || json_object_set_new(vocab, sp[i], json_integer((json_int_t)i)) != 0)
            oom = 1;
    }
    for (int k = 0; k < 3 && !oom; k++)
        if (json_object_set_new(vocab, special_tokens[k], json_integer(first_special + k)) != 0 ||
            json_array_append_new(added, added_token(first_special + k, special_tokens[k])) != 0)
            oom = 1;
    for (size_t i = 0; i < b->nmerge && !oom; i++) {
        const char *x = sp[b->merges[i][0]], *y = sp[b->merges[i][1]];
        size_t n = strlen(x) + strlen(y) + 2;
        char *m = malloc(n);
        if (!m) {
            oom = 1;
            break;
        }
        snprintf(m, n, "%s %s", x, y);
        if (json_array_append_new(merges, json_string(m)) != 0)
            oom = 1;
        free(m);
    }
    for (size_t i = 0; sp && i < b->ntok; i++)
        free(sp[i]);
    free(sp);
    json_t *t = NULL;
    if (!oom)
        t = json_pack("{s:s,s:n,s:n,s:o,s:n,"
                      "s:{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b,s:b,s:b}]},"
                      "s:{s:s,s:b,s:b,s:b},s:{s:s,s:b,s:b,s:b},"
                      "s:{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:o,s:o}}",
                      "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer",
                      "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern", "Regex",
                      gpt2_split_regex, "behavior", "Isolated", "invert", 0, "type", "ByteLevel", "add_prefix_space", 0,
                      "trim_offsets", 1, "use_regex", 0,
                      "post_processor", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0,
                      "decoder", "type", "ByteLevel", "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0,
                      "model", "type", "BPE", "dropout", "unk_token", "continuing_subword_prefix",
                      "end_of_word_suffix", "fuse_unk", 0, "byte_fallback", 0, "ignore_merges", 0, "vocab", vocab,
                      "merges", merges);
    else {
        json_decref(added);
        json_decref(vocab);
        json_decref(merges);
    }
    return t;
}

static json_t *tokenizer_config_json(const mk_spec *s)
{
    const int first_special = mk_eos_id(s);
    json_t *dec = json_object();
    if (!dec)
        return NULL;
    for (int k = 0; k < 3; k++) {
        char id[16];
        snprintf(id, sizeof(id), "%d", first_special + k);
        json_t *e = json_pack("{s:s,s:b,s:b,s:b,s:b,s:b}", "content", special_tokens[k], "lstrip", 0, "normalized",
                              0, "rstrip", 0, "single_word", 0, "special", 1);
        if (!e || json_object_set_new(dec, id, e) != 0) {
            json_decref(dec);
            return NULL;
        }
    }
    return json_pack("{s:b,s:b,s:o,s:n,s:s,s:b,s:s,s:s,s:i,s:s,s:b,s:s,s:n}", "add_bos_token", 0, "add_eos_token", 0,
                     "added_tokens_decoder", dec, "bos_token", "chat_template", chatml_template,
                     "clean_up_tokenization_spaces", 0, "eos_token", special_tokens[0], "errors", "replace",
                     "model_max_length", s->max_pos, "pad_token", special_tokens[0], "split_special_tokens", 0,
                     "tokenizer_class", "PreTrainedTokenizerFast", "unk_token");
}

int mk_write_tokenizer(const mk_spec *s, const char *dir, char *err, size_t errcap)
{
    const size_t target = (size_t)s->vocab - 3; /* tokens before the specials */
    bpe b = {0};
    b.captok = 512;
    b.toks = malloc(b.captok * sizeof(*b.toks));
    if (!b.toks || strmap_init(&b.index, 1024) != 0) {
        free(b.toks);
        snprintf(err, errcap, "out of memory building the tokenizer");
        return -1;
    }
    int rc = 0;
    for (int c = 0; c < 256 && rc == 0; c++) {
        b.toks[c].bytes = malloc(1);
        if (!b.toks[c].bytes) {
            rc = -1;
            break;
        }
        b.toks[c].bytes[0] = (unsigned char)c;
        b.toks[c].len = 1;
        b.ntok++;
        rc = strmap_put(&b.index, b.toks[c].bytes, 1, c);
    }
    if (rc != 0)
        snprintf(err, errcap, "out of memory building the tokenizer");
    if (rc == 0)
        rc = train(&b, target, err, errcap);
    if (rc == 0)
        rc = fill(&b, target, err, errcap);
    if (rc == 0) {
        json_t *tj = tokenizer_json(&b, s);
        rc = mk_write_json(tj, dir, "tokenizer.json", err, errcap);
    }
    if (rc == 0)
        rc = mk_write_json(tokenizer_config_json(s), dir, "tokenizer_config.json", err, errcap);
    bpe_free(&b);
    return rc;
}
