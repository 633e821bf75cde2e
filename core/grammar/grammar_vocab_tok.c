/* An sy_gvocab from a loaded tokenizer (what the host builds per model). */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "grammar/grammar_impl.h"
#include "tokenizer/tokenizer.h"

int sy_gvocab_from_tokenizer(const sy_tokenizer *t, const int32_t *eos, size_t n_eos, sy_gvocab **out, sy_err *err)
{
    if (!t || !out)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gvocab_from_tokenizer: NULL %s", t ? "out" : "tokenizer");
    int32_t n = sy_tokenizer_vocab_size(t);
    if (n <= 0)
        return sy_err_set(err, SY_ERR_INVALID, "sy_gvocab_from_tokenizer: the tokenizer has no tokens");
    if (!eos)
        n_eos = sy_tokenizer_eos(t, &eos);
    char **bytes = calloc((size_t)n, sizeof *bytes);
    size_t *lens = calloc((size_t)n, sizeof *lens);
    bool *special = calloc((size_t)n, sizeof *special);
    int rc = SY_OK;
    if (!bytes || !lens || !special) {
        rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory reading the tokenizer's %d tokens", (int)n);
        goto out;
    }
    char small[256];
    for (int32_t i = 0; i < n; i++) {
        int len = sy_tokenizer_token_bytes(t, i, small, sizeof small);
        if (len <= 0)
            continue;
        bytes[i] = malloc((size_t)len);
        if (!bytes[i]) {
            rc = sy_err_set(err, SY_ERR_NOMEM, "out of memory reading the tokenizer's %d tokens", (int)n);
            goto out;
        }
        if ((size_t)len <= sizeof small)
            memcpy(bytes[i], small, (size_t)len);
        else
            sy_tokenizer_token_bytes(t, i, bytes[i], (size_t)len);
        lens[i] = (size_t)len;
        special[i] = sy_tokenizer_is_special(t, i);
    }
    rc = sy_gvocab_new(n, (const char *const *)bytes, lens, special, eos, n_eos, out, err);
out:
    for (int32_t i = 0; bytes && i < n; i++)
        free(bytes[i]);
    free(bytes);
    free(lens);
    free(special);
    return rc;
}
