/*
 * The grammar core's own structures: the parsed sources (a tree per rule),
 * the compiled byte-level grammar (flat element arrays, as llama.cpp lays
 * its rules out), the token trie, and the matcher's persistent stacks.
 */
#ifndef SY_GRAMMAR_IMPL_H
#define SY_GRAMMAR_IMPL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "grammar/grammar_internal.h"

/* ------------------------------------------------------------ sources */

enum { GN_LIT, GN_CLASS, GN_REF, GN_ALT, GN_SEQ, GN_REP };

typedef struct gnode gnode;
struct gnode {
    int kind;
    bool neg;          /* GN_CLASS: [^...] */
    int line, col;     /* where it starts in its source text */
    int min, max;      /* GN_REP: max -1 = unbounded */
    size_t n;          /* GN_LIT: bytes; GN_CLASS: ranges; GN_ALT/GN_SEQ: kids */
    char *text;        /* GN_LIT: UTF-8 bytes; GN_REF: rule name */
    uint32_t *ranges;  /* GN_CLASS: n pairs lo, hi (code points, inclusive) */
    gnode **kids;      /* GN_ALT/GN_SEQ: n kids; GN_REP: kids[0] */
};

typedef struct grule {
    char *name;
    char *where; /* source name, for errors */
    int line, col;
    gnode *body; /* GN_ALT */
} grule;

struct sy_gsrc {
    grule *rules;
    size_t n, cap;
};

void gnode_free(gnode *n);
const grule *gsrc_find(const sy_gsrc *src, const char *name);

/* ------------------------------------------------------------ compiled */

/* Element kinds. A stack's top is always a GE_BYTES position once expanded. */
enum { GE_END = 0, GE_BYTES = 1, GE_REF = 2 };

typedef struct gelem {
    uint8_t kind;
    int32_t arg; /* GE_BYTES: byte-set index; GE_REF: rule; GE_END: the rule it ends */
} gelem;

/* Where a rule's alternatives may return to: one position (the element
 * after the only call site), or many / the end of the root. */
enum { GCONT_ONE = 0, GCONT_MANY = 1 };

struct sy_grammar {
    gelem *el;         /* all alternatives, each ended by GE_END */
    size_t n_el;
    int32_t *rule_of;  /* n_el: the rule an element belongs to */
    int32_t *lit_of;   /* n_el: literal index when a quoted literal starts here, else -1 */
    uint32_t (*sets)[8]; /* byte sets, 256 bits each */
    size_t n_sets;
    int32_t *alt;      /* starts of alternatives, rule r: alt[alt_off[r] .. alt_off[r+1]) */
    int32_t *alt_off;
    char **rule_name;  /* n_rules: as written, or "parent-N" for helpers */
    int32_t n_rules;
    int32_t root;
    int32_t *cont;     /* n_rules: the single return position, or -1 (many / root) */
    uint32_t (*follow)[8]; /* n_rules: the bytes that may come right after the rule */
    char **lit_text;   /* n_lits literal texts (for special tokens) */
    size_t *lit_len;
    size_t n_lits;
    /* Token caches per vocabulary (grammar_mask.c), filled lazily. */
    pthread_mutex_t mu;
    struct gmask_cache *caches;
};

static inline bool gset_has(const uint32_t *set, uint8_t b)
{
    return (set[b >> 5] >> (b & 31)) & 1u;
}

/* ------------------------------------------------------------ vocabulary */

struct sy_gvocab {
    int32_t n_vocab;
    uint64_t fingerprint; /* content hash: caches key on it, not on the pointer */
    /* Trie of the ordinary tokens in preorder; node 0 is the root (no byte). */
    uint8_t *tr_byte;
    uint16_t *tr_depth;
    int32_t *tr_end;   /* index after the node's subtree */
    int32_t *tr_tok;   /* first token ending at the node, or -1 */
    int32_t *tok_next; /* n_vocab: next token with the same bytes, or -1 */
    size_t n_nodes;
    uint16_t max_depth;
    /* Token bytes (a copy). */
    char **bytes;
    size_t *lens;
    uint8_t *kind; /* n_vocab: GV_NONE / GV_PLAIN / GV_SPECIAL / GV_EOS */
    int32_t *special; /* the special (non-EOS) token ids */
    size_t n_special;
    int32_t *eos;
    size_t n_eos;
};

enum { GV_NONE = 0, GV_PLAIN = 1, GV_SPECIAL = 2, GV_EOS = 3 };

/* ------------------------------------------------------------ stacks */

/* Stack ids: >= 0 a node in the matcher's arena, or one of these. */
#define GS_EMPTY (-1)   /* the root has ended: the text is a sentence */
#define GS_UNKNOWN (-2) /* (cache walks) the callers below are not known */
#define GS_ESCAPE (-3)  /* (cache walks) past a rule's end into an unknown caller */
/* (cache walks) a node whose pos is GESC_POS(r): rule r ended into an
 * unknown caller; the next byte must be in follow[r], then GS_ESCAPE. */
#define GESC_POS(r) (-16 - (int32_t)(r))
#define GESC_RULE(pos) (-16 - (pos))

typedef struct gnode_s {
    int32_t pos, parent;
} gnode_s;

/* A persistent stack arena: nodes are hash-consed, so equal stacks are
 * equal ids and a set of stacks deduplicates by id. */
typedef struct garena {
    gnode_s *nodes;
    size_t n, cap;
    int32_t *tab; /* open addressing, -1 empty */
    size_t tab_cap;
    uint32_t *seen; /* per node: stamp, for set dedup */
    size_t seen_cap;
    uint32_t stamp;
    uint32_t seen_special[3]; /* stamps for GS_EMPTY, GS_UNKNOWN, GS_ESCAPE */
    bool oom;
    bool too_many; /* this round's set passed GSTACKS_MAX (cleared by garena_begin_set) */
} garena;

/*
 * The most stacks one set may hold. Hash-consing merges equal stacks, but a
 * rule that can close in several ways nested inside itself
 * (x ::= "a" x "b" | "a" x "c" | "") keeps every sequence of pending
 * closers apart: 2^n stacks after n bytes, and a byte costs time in
 * proportion. Past this bound the matcher refuses the grammar as too
 * ambiguous instead of stalling the step (the JSON-schema and tool-call
 * grammars the server builds stay in the tens).
 */
#define GSTACKS_MAX (1u << 12)

/* A growable list of stack ids. */
typedef struct gvec {
    int32_t *v;
    size_t n, cap;
} gvec;

int garena_init(garena *a);
void garena_free(garena *a);
void gvec_free(gvec *v);
bool gvec_push(gvec *v, int32_t x);

/* Starts a dedup round (for gexpand calls that build one set). */
void garena_begin_set(garena *a);
/* Expands raw stack (pos, parent) into expanded stacks appended to out.
 * local: at GS_UNKNOWN follow the grammar's single return positions and
 * emit GS_ESCAPE where there are many. Returns false when out of memory. */
bool gexpand(const sy_grammar *g, garena *a, int32_t pos, int32_t parent, bool local, gvec *out);
/* Advances set in[0..n) by byte b into out (cleared first). */
bool gadvance(const sy_grammar *g, garena *a, const int32_t *in, size_t n, uint8_t b, bool local, gvec *out);

/* Interned sets of stack ids with memoised byte transitions (grammar_sets.c). */
enum { GSET_EXACT = 1, GSET_UNCERTAIN = 2, GSET_END = 4 };
typedef struct gsets {
    int32_t *pool;
    size_t pool_n, pool_cap;
    uint32_t *off, *len;
    uint8_t *flags; /* GSET_*: a stack (or escape node), GS_ESCAPE, GS_EMPTY present */
    size_t n, cap;
    int32_t *tab;
    size_t tab_cap;
    int32_t **next; /* per set: NULL, or 256 successor ids (-1 not yet known) */
    gvec scratch;
} gsets;

int gsets_init(gsets *s);
void gsets_free(gsets *s);
/* The id of the set v[0..n) (sorted in place); id 0 is the empty set; -1 out of memory. */
int32_t gsets_intern(gsets *s, int32_t *v, size_t n);
/* The set that set becomes on byte b; -1 out of memory. */
int32_t gsets_step(gsets *s, const sy_grammar *g, garena *a, int32_t set, uint8_t b, bool local);

/* Masks a matcher filled lately, by the set of stacks they were for. */
#define GMASK_MEMO 4
typedef struct gmask_memo {
    int32_t set;
    uint64_t used;
    uint32_t *mask;
} gmask_memo;

struct sy_gmatcher {
    const sy_grammar *g;
    const sy_gvocab *v;
    garena a;
    gvec cur;   /* the current expanded stacks */
    gvec tmp;
    bool ended; /* EOS accepted */
    /* mask scratch (grammar_mask.c) */
    gsets sets;         /* interned sets, for the walks */
    int32_t *walk;      /* per depth: the set id after that many bytes */
    size_t walk_cap;
    gmask_memo memo[GMASK_MEMO];
    uint64_t mtick;
    size_t compact_nodes, compact_sets; /* gmatcher_compact's bounds */
    size_t fed;                         /* bytes accepted so far, for errors */
    const struct gmask_entry **ent; /* per position, the cache entry (or NULL) */
    struct gmask_cache *cache;
};

void gmask_caches_free(sy_grammar *g);
/* The error for a set past GSTACKS_MAX after m->fed bytes (what: the step that met it, e.g. "token 5"). */
int gmatcher_too_ambiguous(const sy_gmatcher *m, const char *what, sy_err *err);
/* Gives each call site of a small shared rule its own copy (grammar_clone.c). */
int gclone_shared_rules(sy_grammar *g, sy_err *err);
/* Advances m's stacks by n bytes; false (nothing changes) when they leave the language, or when the
 * stacks would pass GSTACKS_MAX (then m->a.too_many is set). */
bool gmatcher_feed(sy_gmatcher *m, const char *s, size_t n);
/* Moves m's current stacks into a fresh arena (and drops the interned
 * sets) when the arena or the sets have grown past m's bounds, or always
 * with force. Stack and set ids change: a gsaved taken before is void.
 * sy_gmatcher_fill_mask calls it first. */
int gmatcher_compact(sy_gmatcher *m, bool force);
/* A matcher's logical state, to try a token and put it back (tests: the
 * brute-force oracle of the masks). */
typedef struct gsaved {
    gvec cur;
    bool ended;
    size_t fed;
} gsaved;
bool gmatcher_save(const sy_gmatcher *m, gsaved *s);
void gmatcher_restore(sy_gmatcher *m, gsaved *s);


#endif
