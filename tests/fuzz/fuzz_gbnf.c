/*
 * Fuzz target: the GBNF parser, compiler, matcher and token masks
 * (core/grammar). The input up to the first NUL byte is GBNF (root rule
 * `root`); what follows is a text. The dump of what parsed must parse
 * again to the same language (both compile or both refuse, and agree on
 * the text); then the text is fed one byte at a time as tokens of a small
 * vocabulary (every byte, some multi-byte strings, partial UTF-8, a special
 * token), and before each byte the mask must equal a brute-force scan of
 * that vocabulary. Errors are fine; crashes, leaks and disagreement are not.
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "grammar/grammar_impl.h"

static const char *const extra[] = {"ab", "\"a", "a\"", "{\"", "\":", "\xC3\xA9", "\xE4\xB8", "\xAD\xE4", "  ",
                                    "<tool_call>", "\n\n", "0.", "true", ",\"", "\xF0\x9F"};
enum { N_EXTRA = sizeof extra / sizeof *extra, N_VOCAB = 256 + N_EXTRA + 1 };

static sy_gvocab *small_vocab(void)
{
    const char *bytes[N_VOCAB];
    size_t lens[N_VOCAB];
    bool special[N_VOCAB] = {0};
    char single[256];
    for (int b = 0; b < 256; b++) {
        single[b] = (char)b;
        bytes[b] = &single[b];
        lens[b] = 1;
    }
    for (int i = 0; i < N_EXTRA; i++) {
        bytes[256 + i] = extra[i];
        lens[256 + i] = strlen(extra[i]);
        special[256 + i] = extra[i][0] == '<';
    }
    int32_t eos = N_VOCAB - 1;
    bytes[eos] = "</s>";
    lens[eos] = 4;
    sy_gvocab *v = NULL;
    sy_err err;
    if (sy_gvocab_new(N_VOCAB, bytes, lens, special, &eos, 1, &v, &err) != SY_OK)
        abort();
    return v;
}

/* The mask must be what trying every token on the matcher gives. */
static void check_masks(const sy_grammar *g, const sy_gvocab *v, const char *tail, size_t n)
{
    sy_gmatcher *m;
    sy_err err = {{0}};
    if (sy_gmatcher_new(g, v, &m, &err) != SY_OK) {
        if (!strstr(err.msg, "too ambiguous"))
            abort(); /* only the stack bound refuses a grammar that compiled */
        return;
    }
    uint32_t mask[(N_VOCAB + 31) / 32];
    for (size_t i = 0; i <= n && i < 48; i++) {
        if (sy_gmatcher_fill_mask(m, mask, &err) != SY_OK) {
            if (strstr(err.msg, "too ambiguous"))
                break; /* the stack bound (GSTACKS_MAX), which says so */
            if (!strstr(err.msg, "stuck") || sy_gmatcher_can_end(m) != (strstr(err.msg, "EOS") != NULL))
                abort(); /* only a stuck grammar refuses, and it says so */
            break;
        }
        for (int32_t t = 0; t < N_VOCAB; t++) {
            gsaved s;
            if (!gmatcher_save(m, &s))
                abort();
            bool ok = sy_gmatcher_accept_token(m, t, &err) == SY_OK;
            gmatcher_restore(m, &s);
            if (!ok && strstr(err.msg, "too ambiguous"))
                goto out; /* the token would pass the stack bound: its mask bit stands for the language */
            if (ok != (bool)((mask[t >> 5] >> (t & 31)) & 1u))
                abort(); /* the mask disagrees with the brute-force scan */
        }
        if (i == n || sy_gmatcher_accept_token(m, (uint8_t)tail[i], &err) != SY_OK)
            break;
    }
out:
    sy_gmatcher_free(m);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *nul = memchr(data, 0, size);
    size_t head_len = nul ? (size_t)(nul - (const char *)data) : size;
    if (head_len > 4096)
        return 0; /* long grammars only slow the search down */
    char *head = malloc(head_len + 1);
    if (!head)
        return 0;
    memcpy(head, data, head_len);
    head[head_len] = 0;
    const char *tail = nul ? nul + 1 : "";
    size_t n = nul ? size - head_len - 1 : 0;
    /* A byte costs up to GSTACKS_MAX stack steps (about 1 us each in this
     * build), so a long text takes seconds without reaching a state a short
     * one cannot: only the search slows. */
    if (n > 512)
        n = 512;

    sy_gsrc *src = sy_gsrc_new();
    sy_err err = {{0}};
    if (sy_gsrc_add_gbnf(src, head, "fuzz", &err) != SY_OK) {
        if (!strstr(err.msg, "fuzz:"))
            abort(); /* every parse error says where */
        fuzz_note("gbnf: %s", err.msg);
        sy_gsrc_free(src);
        free(head);
        return 0;
    }
    char *dump = sy_gsrc_dump(src);
    sy_gsrc *again = sy_gsrc_new();
    if (!dump || sy_gsrc_add_gbnf(again, dump, "dump", &err) != SY_OK)
        abort(); /* the dump of what parsed must parse */
    sy_grammar *g = NULL, *g2 = NULL;
    int rc = sy_grammar_compile(src, "root", &g, &err);
    int rc2 = sy_grammar_compile(again, "root", &g2, &err);
    if ((rc == SY_OK) != (rc2 == SY_OK))
        abort(); /* the dump is the same grammar */
    if (g) {
        if (sy_grammar_accepts(g, tail, n) != sy_grammar_accepts(g2, tail, n))
            abort();
        sy_gvocab *v = small_vocab();
        check_masks(g, v, tail, n);
        sy_gvocab_free(v);
    } else {
        fuzz_note("gbnf: compile: %s", err.msg);
    }
    sy_grammar_free(g);
    sy_grammar_free(g2);
    sy_gsrc_free(again);
    sy_gsrc_free(src);
    free(dump);
    free(head);
    return 0;
}
