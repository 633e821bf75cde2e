/*
 * What steers a request's output in the server (serve/guide.h), on the
 * build's random-weight small model through the host serving API:
 * logit_bias forces and bans tokens; every constrained output (JSON
 * object, JSON schema, regex, choice, GBNF) is a text of its language,
 * checked by an independent oracle (python's json, jsonschema and re via
 * $PYTHON_JSONSCHEMA); constrained and free requests share steps without
 * changing the free ones' greedy tokens; the mask leaves the reported
 * logprobs the model's; tool_choice required/named gives parsed calls
 * whose arguments validate; and the <think> rule: text before </think> is
 * free, the grammar reads only what follows.
 */
#include "config.h"

#include "serve/guide.h"
#include "serve/server.h"
#include "test_check.h"
#include "util/log.h"

#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_OUT 512
#define MAX_CALLS 8

/* ------------------------------------------------------------ a test frontend */

typedef struct collector {
    pthread_mutex_t lock;
    pthread_cond_t cv;
    int32_t toks[MAX_OUT];
    float lps[MAX_OUT];
    int32_t top0[MAX_OUT];
    int n;
    char text[8192];
    size_t text_len;
    char reasoning[8192];
    size_t reasoning_len;
    /* Tool calls as a client accumulates them from the pieces. */
    int n_calls;
    char call_id[MAX_CALLS][64], call_name[MAX_CALLS][64], call_args[MAX_CALLS][2048];
    bool bad_delta; /* a piece that was out of order */
    int done;
    char finish[16];
} collector;

static void coll_init(collector *c)
{
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->cv, NULL);
}

static void coll_fini(collector *c)
{
    pthread_mutex_destroy(&c->lock);
    pthread_cond_destroy(&c->cv);
}

static void on_event(void *user, const sy_event *ev)
{
    collector *c = user;
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < ev->n_tokens && c->n < MAX_OUT; i++) {
        c->toks[c->n] = ev->tokens[i];
        c->lps[c->n] = ev->logprobs ? ev->logprobs[i] : 0.0f;
        c->top0[c->n] = ev->n_top > 0 ? ev->top_ids[i * (size_t)ev->n_top] : -1;
        c->n++;
    }
    if (ev->text_len && c->text_len + ev->text_len < sizeof c->text) {
        memcpy(c->text + c->text_len, ev->text, ev->text_len);
        c->text_len += ev->text_len;
    }
    if (ev->reasoning_len && c->reasoning_len + ev->reasoning_len < sizeof c->reasoning) {
        memcpy(c->reasoning + c->reasoning_len, ev->reasoning, ev->reasoning_len);
        c->reasoning_len += ev->reasoning_len;
    }
    for (size_t i = 0; i < ev->n_tool_calls; i++) {
        const sy_tool_call_delta *d = &ev->tool_calls[i];
        if (d->index < 0 || d->index >= MAX_CALLS || d->index > c->n_calls ||
            (d->index == c->n_calls && (!d->id || !d->name))) {
            c->bad_delta = true;
            continue;
        }
        if (d->index == c->n_calls) {
            snprintf(c->call_id[d->index], sizeof c->call_id[0], "%s", d->id);
            snprintf(c->call_name[d->index], sizeof c->call_name[0], "%s", d->name);
            c->n_calls++;
        }
        size_t have = strlen(c->call_args[d->index]);
        if (have + d->arguments_len < sizeof c->call_args[0]) {
            memcpy(c->call_args[d->index] + have, d->arguments, d->arguments_len);
            c->call_args[d->index][have + d->arguments_len] = '\0';
        }
    }
    c->text[c->text_len] = '\0';
    c->reasoning[c->reasoning_len] = '\0';
    if (ev->type == SY_EV_DONE || ev->type == SY_EV_ERROR) {
        snprintf(c->finish, sizeof c->finish, "%s", ev->type == SY_EV_DONE ? ev->finish_reason : "error");
        if (ev->type == SY_EV_ERROR)
            fprintf(stderr, "request error: %s\n", ev->error);
        c->done = 1;
    }
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->lock);
}

static void coll_wait(collector *c)
{
    pthread_mutex_lock(&c->lock);
    while (!c->done)
        pthread_cond_wait(&c->cv, &c->lock);
    pthread_mutex_unlock(&c->lock);
}

static sy_request base_request(const int32_t *ids, size_t n, int32_t max_tokens, collector *c)
{
    sy_request r;
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    r.prompt_ids = ids;
    r.n_prompt = n;
    r.max_tokens = max_tokens;
    r.top_p = 1.0f;
    r.repetition_penalty = 1.0f;
    r.skip_special = 1;
    r.top_logprobs = -1;
    r.on_event = on_event;
    r.user = c;
    return r;
}

/* ------------------------------------------------------------ set-up */

typedef struct env {
    sy_engine *e;
    sy_server *srv;
    const sy_serving_api *api;
    void *ctx;
    const char *python;
    char tmp[256];
    int32_t closers[64]; /* tokens whose text holds '"' or '}' */
    float closer_bias[64];
    size_t n_closers;
} env;

static void find_closers(env *v)
{
    const int32_t vocab = sy_engine_model_config(v->e)->vocab;
    for (int32_t id = 0; id < vocab && v->n_closers < 64; id++) {
        char *text = NULL;
        size_t len = 0;
        sy_err err = {{0}};
        if (v->api->detokenize(v->ctx, &id, 1, &text, &len, &err) != SY_OK)
            continue;
        if (memchr(text, '"', len) || memchr(text, '}', len)) {
            v->closers[v->n_closers] = id;
            v->closer_bias[v->n_closers++] = 6.0f;
        }
        sy_server_host(v->srv)->free(v->ctx, text);
    }
    CHECK(v->n_closers > 2);
}

static sy_engine *open_engine(const char *const *sets, size_t n, sy_err *err)
{
    char path[4096];
    sy_config *cfg = NULL;
    snprintf(path, sizeof path, "%s/etc/switchyard-build.ini", getenv("SY_BUILDDIR"));
    if (sy_config_load(path, &cfg, err))
        return NULL;
    snprintf(path, sizeof path, "model.path=%s/models/small", getenv("SY_BUILDDIR"));
    /* make check pins matmul = f32 through SWITCHYARD_SET (Makefile.am), as the CLI applies it */
    int rc = sy_config_apply_env(cfg, err);
    if (!rc)
        rc = sy_config_set(cfg, path, err);
    for (size_t i = 0; i < n && !rc; i++)
        rc = sy_config_set(cfg, sets[i], err);
    sy_engine *e = NULL;
    sy_engine_opts eo = {.plugin_dirs = getenv("SY_PLUGIN_DIR"), .progress = false};
    if (!rc && sy_engine_open(cfg, &eo, &e, err))
        e = NULL;
    sy_config_free(cfg);
    return e;
}

static int submit(env *v, sy_request *r, sy_err *err) { return v->api->submit(v->ctx, r, NULL, err); }

static void run(env *v, sy_request *r, collector *c)
{
    sy_err err = {{0}};
    coll_init(c);
    r->user = c;
    int rc = submit(v, r, &err);
    CHECK(rc == SY_OK);
    if (rc) {
        fprintf(stderr, "submit: %s\n", err.msg);
        c->done = 1;
        return;
    }
    coll_wait(c);
}

/* ------------------------------------------------------------ the oracle */

/*
 * Python checks each line of file: {"kind": "json"|"schema"|"regex"|"choice", "rule": ..., "text": ...};
 * prints the failures; exit 0 when all pass.
 */
static const char ORACLE[] =
    "import json, re, sys\n"
    "import jsonschema\n"
    "bad = 0\n"
    "for n, line in enumerate(open(sys.argv[1]), 1):\n"
    "    c = json.loads(line)\n"
    "    k, rule, text = c['kind'], c.get('rule'), c['text']\n"
    "    try:\n"
    "        if k == 'json':\n"
    "            v = json.loads(text)\n"
    "            assert rule != 'object' or isinstance(v, dict), 'not an object'\n"
    "        elif k == 'schema':\n"
    "            jsonschema.validate(json.loads(text), rule)\n"
    "        elif k == 'regex':\n"
    "            assert re.fullmatch(rule, text), 'no full match'\n"
    "        elif k == 'choice':\n"
    "            assert text in rule, 'not a choice'\n"
    "    except Exception as e:\n"
    "        bad += 1\n"
    "        print('line %d (%s): %r: %s' % (n, k, text, e))\n"
    "print('%d checked, %d invalid' % (n, bad))\n"
    "sys.exit(1 if bad else 0)\n";

typedef struct oracle {
    FILE *f;
    char path[300];
    int n;
} oracle;

static void oracle_add(oracle *o, const char *kind, const char *rule_json, const char *text)
{
    json_t *line = json_object();
    json_object_set_new(line, "kind", json_string(kind));
    if (rule_json)
        json_object_set_new(line, "rule", json_loads(rule_json, JSON_DECODE_ANY, NULL));
    json_object_set_new(line, "text", json_string(text));
    char *s = json_dumps(line, JSON_COMPACT);
    fprintf(o->f, "%s\n", s);
    free(s);
    json_decref(line);
    o->n++;
}

/* Every line valid per python; fails loudly when the interpreter or jsonschema is missing. */
static void oracle_check(env *v, oracle *o)
{
    fclose(o->f);
    char script[300], cmd[1024];
    snprintf(script, sizeof script, "%s/oracle.py", v->tmp);
    FILE *f = fopen(script, "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs(ORACLE, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "'%s' '%s' '%s'", v->python, script, o->path);
    printf("oracle: %d outputs\n", o->n);
    fflush(stdout);
    const int rc = system(cmd);
    CHECK(rc == 0);
    if (rc)
        fprintf(stderr, "FAIL: the oracle (%s) found invalid outputs or could not run\n", cmd);
}

/* ------------------------------------------------------------ logit_bias */

static void test_logit_bias(env *v)
{
    const int32_t prompt[] = {5, 17, 33, 8, 91, 12, 40, 7};
    const size_t np = 8;
    collector ref, up, down;
    sy_request r = base_request(prompt, np, 12, NULL);
    r.ignore_eos = 1;
    run(v, &r, &ref);
    /* +100 on a token the model would not pick makes greedy pick it every time. */
    int32_t forced = (ref.toks[0] + 77) % 1000;
    float plus = 100.0f, minus = -100.0f;
    r.logit_bias_ids = &forced;
    r.logit_bias = &plus;
    r.n_logit_bias = 1;
    run(v, &r, &up);
    bool all = up.n == 12;
    for (int i = 0; i < up.n; i++)
        all &= up.toks[i] == forced;
    CHECK(all);
    /* -100 on the greedy token bans it: another comes instead, and it never appears. */
    r.logit_bias_ids = &ref.toks[0];
    r.logit_bias = &minus;
    run(v, &r, &down);
    CHECK(down.n == 12 && down.toks[0] != ref.toks[0]);
    for (int i = 0; i < down.n; i++)
        CHECK(down.toks[i] != ref.toks[0]);

    /* Validation names the field. */
    sy_err err = {{0}};
    collector bad;
    coll_init(&bad);
    struct {
        int32_t id;
        float bias;
        const char *needle;
    } cases[] = {{-1, 1.0f, "outside the vocabulary"},
                 {1024, 1.0f, "outside the vocabulary"},
                 {3, 101.0f, "[-100, 100]"},
                 {3, NAN, "[-100, 100]"},
                 {3, -INFINITY, "[-100, 100]"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sy_request b = base_request(prompt, np, 4, &bad);
        b.logit_bias_ids = &cases[i].id;
        b.logit_bias = &cases[i].bias;
        b.n_logit_bias = 1;
        CHECK(submit(v, &b, &err) == SY_ERR_INVALID);
        CHECK_CONTAINS(err.msg, "logit_bias");
        CHECK_CONTAINS(err.msg, cases[i].needle);
    }
    const int32_t twice[] = {3, 3};
    const float b2[] = {1.0f, 2.0f};
    sy_request b = base_request(prompt, np, 4, &bad);
    b.logit_bias_ids = twice;
    b.logit_bias = b2;
    b.n_logit_bias = 2;
    CHECK(submit(v, &b, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "twice");
    coll_fini(&ref);
    coll_fini(&up);
    coll_fini(&down);
    coll_fini(&bad);
}

/* ------------------------------------------------------------ constraints */

typedef struct constraint_case {
    int32_t kind;
    const char *text;       /* the request's constraint */
    const char *oracle;     /* the oracle's kind */
    const char *rule;       /* the oracle's rule (JSON) */
} constraint_case;

static const char SCHEMA[] =
    "{\"type\": \"object\", \"properties\": {"
    "\"name\": {\"type\": \"string\", \"maxLength\": 8},"
    "\"age\": {\"type\": \"integer\", \"minimum\": 0, \"maximum\": 150},"
    "\"ok\": {\"type\": \"boolean\"},"
    "\"unit\": {\"enum\": [\"celsius\", \"fahrenheit\"]},"
    "\"tags\": {\"type\": \"array\", \"items\": {\"enum\": [\"a\", \"b\", \"c\"]}, \"maxItems\": 3},"
    "\"where\": {\"type\": \"object\", \"properties\": {\"x\": {\"type\": \"integer\", \"minimum\": -50,"
    " \"maximum\": 50}, \"y\": {\"type\": \"null\"}},"
    " \"required\": [\"x\"], \"additionalProperties\": false}},"
    "\"required\": [\"name\", \"age\", \"ok\", \"where\"], \"additionalProperties\": false}";

static const constraint_case CASES[] = {
    {SY_CONSTRAINT_JSON_SCHEMA, SCHEMA, "schema", SCHEMA},
    {SY_CONSTRAINT_JSON_OBJECT, NULL, "json", "\"object\""},
    {SY_CONSTRAINT_REGEX, "[a-c]{2,5}-[0-9]{3}", "regex", "\"[a-c]{2,5}-[0-9]{3}\""},
    {SY_CONSTRAINT_CHOICE, "[\"yes\", \"no\", \"not sure\"]", "choice", "[\"yes\", \"no\", \"not sure\"]"},
    {SY_CONSTRAINT_GRAMMAR, "root ::= \"(\" item (\",\" item){0,3} \")\"\nitem ::= [0-9] | \"x\"", "regex",
     "\"\\\\([0-9x](,[0-9x]){0,3}\\\\)\""},
};
#define N_CASES (sizeof CASES / sizeof CASES[0])
#define SEEDS 6

static void test_constraints(env *v, oracle *o)
{
    const int32_t prompt[] = {9, 400, 12, 77, 3, 250, 61};
    const size_t np = 7;
    /* Free greedy requests alone first: the reference. */
    enum { N_FREE = 3 };
    collector alone[N_FREE], mixed[N_FREE];
    for (int i = 0; i < N_FREE; i++) {
        sy_request r = base_request(prompt + i, np - (size_t)i, 24, NULL);
        r.ignore_eos = 1;
        run(v, &r, &alone[i]);
    }
    /* Then all together: every kind with several seeds, and the free ones, in the same steps. */
    collector *cc = calloc(N_CASES * SEEDS, sizeof *cc);
    sy_err err = {{0}};
    for (int i = 0; i < N_FREE; i++) {
        coll_init(&mixed[i]);
        sy_request r = base_request(prompt + i, np - (size_t)i, 24, &mixed[i]);
        r.ignore_eos = 1;
        CHECK(submit(v, &r, &err) == SY_OK);
    }
    for (size_t k = 0; k < N_CASES; k++)
        for (int s = 0; s < SEEDS; s++) {
            collector *c = &cc[k * SEEDS + (size_t)s];
            coll_init(c);
            sy_request r = base_request(prompt, np, 300, c);
            r.temperature = s == 0 ? 0.0f : 1.0f;
            r.has_seed = 1;
            r.seed = 1000u + (uint64_t)s;
            r.constraint_kind = CASES[k].kind;
            r.constraint = CASES[k].text;
            r.constraint_path = "response_format";
            if (s == 1)
                r.top_logprobs = 1;
            if (CASES[k].kind == SY_CONSTRAINT_JSON_OBJECT) {
                /* Any object may hold endless strings: a push towards quotes and braces lets a random model end. */
                r.logit_bias_ids = v->closers;
                r.logit_bias = v->closer_bias;
                r.n_logit_bias = v->n_closers;
            }
            int rc = submit(v, &r, &err);
            CHECK(rc == SY_OK);
            if (rc) {
                fprintf(stderr, "constraint %zu: %s\n", k, err.msg);
                c->done = 1;
            }
        }
    for (int i = 0; i < N_FREE; i++) {
        coll_wait(&mixed[i]);
        CHECK(mixed[i].n == alone[i].n && memcmp(mixed[i].toks, alone[i].toks, sizeof(int32_t) * 24) == 0);
    }
    int stopped = 0;
    for (size_t k = 0; k < N_CASES; k++)
        for (int s = 0; s < SEEDS; s++) {
            collector *c = &cc[k * SEEDS + (size_t)s];
            coll_wait(c);
            CHECK(strcmp(c->finish, "stop") == 0);
            if (strcmp(c->finish, "stop") != 0)
                fprintf(stderr, "constraint %zu seed %d: finished \"%s\" after %d tokens: %.200s\n", k, s, c->finish,
                        c->n, c->text);
            stopped += strcmp(c->finish, "stop") == 0;
            oracle_add(o, CASES[k].oracle, CASES[k].rule, c->text);
        }
    printf("constraints: %d of %zu ended by their grammar\n", stopped, N_CASES * SEEDS);
    /* The mask does not touch the reported logprobs: the top alternative of the first token is the free
     * greedy pick, which JSON does not allow first. */
    collector *lp = &cc[0 * SEEDS + 1];
    CHECK(lp->top0[0] >= 0 && lp->lps[0] <= 0.0f);
    collector *free0 = NULL;
    sy_request r = base_request(prompt, np, 1, NULL);
    collector first;
    run(v, &r, &first);
    free0 = &first;
    CHECK(lp->top0[0] == free0->toks[0]);
    if (lp->top0[0] == free0->toks[0] && lp->text[0] == '{' && free0->toks[0] != lp->toks[0])
        printf("logprobs: the model's top token %d is reported although the constraint chose %d\n", free0->toks[0],
               lp->toks[0]);
    coll_fini(&first);
    for (size_t i = 0; i < N_CASES * SEEDS; i++)
        coll_fini(&cc[i]);
    free(cc);
    for (int i = 0; i < N_FREE; i++) {
        coll_fini(&alone[i]);
        coll_fini(&mixed[i]);
    }
}

static void expect_invalid(env *v, int32_t kind, const char *text, const char *path, const char *needle)
{
    const int32_t prompt[] = {5, 6, 7};
    collector c;
    coll_init(&c);
    sy_request r = base_request(prompt, 3, 8, &c);
    r.constraint_kind = kind;
    r.constraint = text;
    r.constraint_path = path;
    sy_err err = {{0}};
    const int rc = submit(v, &r, &err);
    CHECK(rc == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, needle);
    if (rc == SY_OK)
        coll_wait(&c);
    coll_fini(&c);
}

static void test_constraint_errors(env *v)
{
    expect_invalid(v, SY_CONSTRAINT_JSON_SCHEMA, "{\"type\": ", "response_format.json_schema.schema",
                   "response_format.json_schema.schema");
    expect_invalid(v, SY_CONSTRAINT_CHOICE, "[\"a\", 3]", "structured_outputs.choice", "structured_outputs.choice[1]");
    expect_invalid(v, SY_CONSTRAINT_CHOICE, "[]", "structured_outputs.choice", "non-empty");
    expect_invalid(v, SY_CONSTRAINT_GRAMMAR, "root ::= (", "structured_outputs.grammar", "structured_outputs.grammar");
    expect_invalid(v, SY_CONSTRAINT_REGEX, "(ab", "regex", "regex");
    expect_invalid(v, 9, "x", "constraint", "unknown constraint kind");
    expect_invalid(v, SY_CONSTRAINT_REGEX, NULL, "regex", "missing");
}

/* ------------------------------------------------------------ tools */

static const char TOOLS[] =
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": \"Weather in a city\","
    " \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\", \"maxLength\": 10},"
    " \"unit\": {\"type\": \"string\", \"enum\": [\"celsius\", \"fahrenheit\"]}, \"days\": {\"type\": \"integer\","
    " \"minimum\": 1, \"maximum\": 7}}, \"required\": [\"city\"], \"additionalProperties\": false}}},"
    " {\"type\": \"function\", \"function\": {\"name\": \"get_time\", \"parameters\": {\"type\": \"object\","
    " \"properties\": {\"tz\": {\"type\": \"string\", \"enum\": [\"UTC\", \"Europe/Paris\"]}}, \"required\": [\"tz\"],"
    " \"additionalProperties\": false}}}]";

static void tools_prompt(env *v, int32_t **ids, size_t *n)
{
    sy_err err = {{0}};
    char *text = NULL;
    size_t len = 0;
    *ids = NULL;
    *n = 0;
    int rc = v->api->apply_chat_template(v->ctx, "[{\"role\": \"user\", \"content\": \"Weather in Paris?\"}]", TOOLS,
                                         1, NULL, &text, &len, &err);
    CHECK(rc == SY_OK);
    if (rc) {
        fprintf(stderr, "chat template: %s\n", err.msg);
        return;
    }
    CHECK_CONTAINS(text, "<tools>"); /* the Qwen3 template (hermes) renders the tools */
    rc = v->api->tokenize(v->ctx, text, len, 1, ids, n, &err);
    CHECK(rc == SY_OK);
    sy_server_host(v->srv)->free(v->ctx, text);
}

/* Every call's name is a tool and its arguments validate against that tool's parameters (the oracle). */
static void check_calls(oracle *o, const collector *c, const char *only)
{
    json_t *tools = json_loads(TOOLS, 0, NULL);
    CHECK(!c->bad_delta);
    for (int i = 0; i < c->n_calls; i++) {
        json_t *params = NULL;
        size_t k;
        json_t *t;
        json_array_foreach(tools, k, t) {
            json_t *fn = json_object_get(t, "function");
            if (!strcmp(json_string_value(json_object_get(fn, "name")), c->call_name[i]))
                params = json_object_get(fn, "parameters");
        }
        CHECK(params != NULL);
        CHECK(!only || strcmp(c->call_name[i], only) == 0);
        CHECK(strncmp(c->call_id[i], "call_", 5) == 0);
        if (params) {
            char *rule = json_dumps(params, JSON_COMPACT);
            oracle_add(o, "schema", rule, c->call_args[i]);
            free(rule);
        }
    }
    json_decref(tools);
}

static void test_tools(env *v, oracle *o)
{
    int32_t *ids = NULL;
    size_t n = 0;
    tools_prompt(v, &ids, &n);
    if (!ids)
        return;
    enum { N = 6 };
    collector c[N];
    sy_err err = {{0}};
    for (int i = 0; i < N; i++) {
        coll_init(&c[i]);
        sy_request r = base_request(ids, n, 300, &c[i]);
        r.temperature = i == 0 ? 0.0f : 1.0f;
        r.has_seed = 1;
        r.seed = 7u + (uint64_t)i;
        r.tools_json = TOOLS;
        r.tool_choice = i < 4 ? SY_TOOL_CHOICE_REQUIRED : SY_TOOL_CHOICE_FUNCTION;
        r.tool_choice_name = i < 4 ? NULL : "get_time";
        r.parallel_tool_calls = i % 2;
        int rc = submit(v, &r, &err);
        CHECK(rc == SY_OK);
        if (rc) {
            fprintf(stderr, "tools %d: %s\n", i, err.msg);
            c[i].done = 1;
        }
    }
    int calls = 0;
    for (int i = 0; i < N; i++) {
        coll_wait(&c[i]);
        CHECK(strcmp(c[i].finish, "tool_calls") == 0);
        CHECK(c[i].n_calls >= 1);
        CHECK(c[i].n_calls == 1 || (c[i].n_calls > 1 && i % 2 == 1 && i < 4));
        /* The markup never reaches the content. */
        CHECK(strstr(c[i].text, "<tool_call>") == NULL && strstr(c[i].text, "</tool_call>") == NULL);
        if (strcmp(c[i].finish, "tool_calls") != 0 || c[i].n_calls != 1) {
            fprintf(stderr, "tools %d: finished \"%s\" with %d calls; content \"%.300s\"\n", i, c[i].finish,
                    c[i].n_calls, c[i].text);
            for (int k = 0; k < c[i].n_calls; k++)
                fprintf(stderr, "  call %d: %s %s %s\n", k, c[i].call_id[k], c[i].call_name[k], c[i].call_args[k]);
        }
        check_calls(o, &c[i], i < 4 ? NULL : "get_time");
        calls += c[i].n_calls;
        coll_fini(&c[i]);
    }
    printf("tools: %d calls from %d forced requests\n", calls, N);

    /* auto on a random model: whatever it writes, it ends, and no markup leaks. */
    collector a;
    sy_request r = base_request(ids, n, 40, NULL);
    r.tools_json = TOOLS;
    r.tool_choice = SY_TOOL_CHOICE_AUTO;
    run(v, &r, &a);
    CHECK(strcmp(a.finish, "stop") == 0 || strcmp(a.finish, "length") == 0 || strcmp(a.finish, "tool_calls") == 0);
    coll_fini(&a);

    /* Errors name the field. */
    collector b;
    coll_init(&b);
    r = base_request(ids, n, 8, &b);
    r.tools_json = TOOLS;
    r.tool_choice = SY_TOOL_CHOICE_FUNCTION;
    r.tool_choice_name = "nope";
    CHECK(submit(v, &r, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "tool_choice");
    CHECK_CONTAINS(err.msg, "nope");
    r.tool_choice = SY_TOOL_CHOICE_REQUIRED;
    r.constraint_kind = SY_CONSTRAINT_JSON_OBJECT;
    r.constraint_path = "response_format";
    CHECK(submit(v, &r, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "response_format");
    r.constraint_kind = 0;
    r.tools_json = "[{\"type\": \"function\", \"function\": {}}]";
    CHECK(submit(v, &r, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "tools[0]");
    coll_fini(&b);
    sy_server_host(v->srv)->free(v->ctx, ids);
}

/* ------------------------------------------------------------ <think> */

/*
 * A prompt that opens <think>: the output is free until </think> (a random
 * model writes none in 60 tokens, so nothing is constrained and the text
 * is reasoning); the model-free part checks the switch itself.
 */
static void test_think_engine(env *v)
{
    int32_t *ids = NULL;
    size_t n = 0;
    sy_err err = {{0}};
    CHECK(v->api->tokenize(v->ctx, "Question?<think>", 16, 0, &ids, &n, &err) == SY_OK);
    collector c;
    sy_request r = base_request(ids, n, 60, NULL);
    r.reasoning = 1;
    r.ignore_eos = 1;
    r.constraint_kind = SY_CONSTRAINT_CHOICE;
    r.constraint = "[\"yes\", \"no\"]";
    r.constraint_path = "structured_outputs.choice";
    run(v, &r, &c);
    CHECK(strcmp(c.finish, "length") == 0 && c.n == 60);
    CHECK(c.reasoning_len > 20 && c.text_len == 0);
    if (!(c.reasoning_len > 20 && c.text_len == 0))
        fprintf(stderr, "think: reasoning %zu bytes, content \"%s\"\n", c.reasoning_len, c.text);
    coll_fini(&c);
    sy_server_host(v->srv)->free(v->ctx, ids);
}

static void test_think_switch(void)
{
    /* A vocabulary of single bytes and a few longer tokens. */
    static const char *const extra[] = {"</think>", "</th", "ink>\n{a", "ink>x"};
    enum { NB = 128, NV = NB + 4 };
    char bytes[NB][2];
    const char *toks[NV];
    size_t lens[NV];
    bool special[NV] = {0};
    for (int i = 0; i < NB; i++) {
        bytes[i][0] = (char)i;
        bytes[i][1] = 0;
        toks[i] = bytes[i];
        lens[i] = 1;
    }
    for (int i = 0; i < 4; i++) {
        toks[NB + i] = extra[i];
        lens[NB + i] = strlen(extra[i]);
    }
    const int32_t eos = 0;
    sy_err err = {{0}};
    sy_gvocab *gv = NULL;
    sy_gsrc *src = sy_gsrc_new();
    sy_grammar *g = NULL;
    CHECK(sy_gvocab_new(NV, toks, lens, special, &eos, 1, &gv, &err) == SY_OK);
    CHECK(sy_gsrc_add_gbnf(src, "root ::= \"{\" [a-z]* \"}\"", "test", &err) == SY_OK);
    CHECK(sy_grammar_compile(src, "root", &g, &err) == SY_OK);
    if (!gv || !g)
        goto out;
    sy_guide guide;
    memset(&guide, 0, sizeof guide);
    guide.think_open = -1;
    guide.gvocab = gv;
    for (int k = 0; k < 4; k++) {
        sy_seq s;
        memset(&s, 0, sizeof s);
        s.guide = &guide;
        s.wait_think = true;
        CHECK(sy_gmatcher_new(g, gv, &s.matcher, &err) == SY_OK);
        bool done = false;
        /* Free before the tag, whatever the text. */
        CHECK(!sy_guide_masks(&s));
        CHECK(sy_guide_accept(&s, 'q', "q}", 2, &done, &err) == SY_OK && !done && s.wait_think);
        CHECK(sy_guide_accept(&s, NB + 1, "</th", 4, &done, &err) == SY_OK && s.wait_think);
        if (k == 0) {
            /* The tag split across tokens; what follows it in the token is the grammar's first text. */
            CHECK(sy_guide_accept(&s, NB + 2, "ink>\n{a", 7, &done, &err) == SY_OK && !s.wait_think);
            CHECK(sy_guide_masks(&s));
            CHECK(sy_guide_accept(&s, 'b', "b", 1, &done, &err) == SY_OK && !done);
            CHECK(sy_guide_accept(&s, '}', "}", 1, &done, &err) == SY_OK && done);
            CHECK(sy_guide_can_end(&s));
        } else if (k == 2) {
            /* The tag whole, well inside one long piece (found without the tail). */
            static const char piece[] = "en, more reasoning </think>  {ab";
            CHECK(sy_guide_accept(&s, NB + 2, piece, sizeof piece - 1, &done, &err) == SY_OK && !s.wait_think);
            CHECK(sy_guide_accept(&s, '}', "}", 1, &done, &err) == SY_OK && done);
        } else if (k == 3) {
            /* One byte at a time: the held tail carries the tag across eight tokens. */
            static const char tag[] = "</think>{";
            for (size_t i = 0; i + 1 < sizeof tag - 1; i++)
                CHECK(sy_guide_accept(&s, tag[i], tag + i, 1, &done, &err) == SY_OK && s.wait_think == (i < 7));
            CHECK(sy_guide_accept(&s, '{', "{", 1, &done, &err) == SY_OK && !s.wait_think && !done);
            CHECK(sy_guide_accept(&s, '}', "}", 1, &done, &err) == SY_OK && done);
        } else {
            /* Text after the tag that the grammar refuses fails the request, naming it. */
            CHECK(sy_guide_accept(&s, NB + 3, "ink>x", 5, &done, &err) == SY_ERR_INTERNAL);
            CHECK_CONTAINS(err.msg, "\"x\"");
        }
        sy_gmatcher_free(s.matcher);
    }
out:
    sy_grammar_free(g);
    sy_gsrc_free(src);
    sy_gvocab_free(gv);
}

/* ------------------------------------------------------------ servers */

static void test_families(void)
{
    sy_err err = {{0}};
    const char *bogus[] = {"model.tool_parser=bogus"};
    sy_engine *e = open_engine(bogus, 1, &err);
    CHECK(e != NULL);
    if (!e) {
        fprintf(stderr, "engine: %s\n", err.msg);
        return;
    }
    sy_server *srv = NULL;
    sy_server_opts so = {.max_waiting = 8, .model_id = "test"};
    CHECK(sy_server_new(e, &so, &srv, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "[model] tool_parser");
    CHECK_CONTAINS(err.msg, "hermes");
    sy_server_free(srv);
    sy_engine_close(e);

    /* The small model's ChatML template writes no tool calls: tools are refused, naming the key. */
    e = open_engine(NULL, 0, &err);
    CHECK(e != NULL && sy_server_new(e, &so, &srv, &err) == SY_OK);
    if (!srv) {
        sy_engine_close(e);
        return;
    }
    const int32_t prompt[] = {5, 6, 7};
    collector c;
    coll_init(&c);
    sy_request r = base_request(prompt, 3, 4, &c);
    r.tools_json = TOOLS;
    CHECK(sy_server_api(srv)->submit(sy_server_host(srv)->ctx, &r, NULL, &err) == SY_ERR_INVALID);
    CHECK_CONTAINS(err.msg, "set [model] tool_parser");
    /* tool_choice none: the output is plain text, tools or not. */
    r.tool_choice = SY_TOOL_CHOICE_NONE;
    CHECK(sy_server_api(srv)->submit(sy_server_host(srv)->ctx, &r, NULL, &err) == SY_OK);
    CHECK(sy_server_start(srv, &err) == SY_OK);
    coll_wait(&c);
    CHECK(strcmp(c.finish, "length") == 0 || strcmp(c.finish, "stop") == 0);
    coll_fini(&c);
    sy_server_free(srv);
    sy_engine_close(e);
}

int main(void)
{
    sy_log_set_level(SY_LOG_WARN);
    const char *shared = getenv("SY_SHARED_DIR");
    env v = {.python = getenv("PYTHON_JSONSCHEMA")};
    if (!getenv("SY_BUILDDIR") || !shared || !getenv("SY_PLUGIN_DIR")) {
        fprintf(stderr, "FAIL: SY_BUILDDIR, SY_SHARED_DIR and SY_PLUGIN_DIR must be set (make check sets them)\n");
        return 1;
    }
    if (!v.python || !*v.python) {
        fprintf(stderr, "FAIL: PYTHON_JSONSCHEMA is not set: configure found no python3 that imports jsonschema "
                        "(the oracle of constrained decoding); set PYTHON_JSONSCHEMA=/path/to/python\n");
        return 1;
    }
    char probe[1100];
    snprintf(probe, sizeof probe, "'%s' -c 'import jsonschema' >/dev/null 2>&1", v.python);
    if (strlen(v.python) > 1000 || system(probe) != 0) {
        fprintf(stderr, "FAIL: PYTHON_JSONSCHEMA=%s cannot import jsonschema (the oracle of constrained decoding)\n",
                v.python);
        return 1;
    }
    snprintf(v.tmp, sizeof v.tmp, "/tmp/sy_test_guide.XXXXXX");
    if (!mkdtemp(v.tmp)) {
        fprintf(stderr, "FAIL: cannot make a temporary directory\n");
        return 1;
    }
    test_think_switch();
    test_families();

    char tpl[4096];
    snprintf(tpl, sizeof tpl, "model.chat_template=%s/chat-templates/templates/Qwen-Qwen3-0.6B.jinja", shared);
    const char *sets[] = {"model.max_seq_len=1024", "scheduler.max_batch_tokens=256", tpl};
    sy_err err = {{0}};
    v.e = open_engine(sets, 3, &err);
    CHECK(v.e != NULL);
    if (!v.e) {
        fprintf(stderr, "FAIL engine: %s\n", err.msg);
        return sy_test_done("test_serve_guide");
    }
    sy_server_opts so = {.max_waiting = 256, .model_id = "test"};
    if (sy_server_new(v.e, &so, &v.srv, &err) || sy_server_start(v.srv, &err)) {
        fprintf(stderr, "FAIL server: %s\n", err.msg);
        sy_engine_close(v.e);
        return 1;
    }
    v.api = sy_server_api(v.srv);
    v.ctx = sy_server_host(v.srv)->ctx;
    oracle o = {0};
    snprintf(o.path, sizeof o.path, "%s/outputs.jsonl", v.tmp);
    o.f = fopen(o.path, "w");
    CHECK(o.f != NULL);
    find_closers(&v);
    test_logit_bias(&v);
    if (o.f) {
        test_constraint_errors(&v);
        test_constraints(&v, &o);
        test_tools(&v, &o);
        test_think_engine(&v);
        oracle_check(&v, &o);
    }
    sy_server_free(v.srv);
    sy_engine_close(v.e);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", v.tmp);
    if (system(cmd) != 0)
        fprintf(stderr, "note: could not remove %s\n", v.tmp);
    return sy_test_done("test_serve_guide");
}
