/*
 * A fake serving host for the http frontend's tests: it dlopens
 * $SY_PLUGIN_DIR/sy-frontend-http.so and hands it a sy_host whose
 * sy_serving_api generates deterministic events on a background thread.
 *
 * Tokens: tokenize gives one id per byte (plus 1 as BOS with
 * add_special); generation step k emits prompt[k % n_prompt] with the text
 * "t<id> ". Prompt words change the behaviour: "busy" (submit answers
 * SY_ERR_UNAVAILABLE), "closing" (the server stops being ready, then submit
 * answers SY_ERR_UNAVAILABLE: a drain that began after ready() said yes),
 * "invalid" (SY_ERR_INVALID), "slow" (30 ms per
 * token), "fail" (an ERROR event after two tokens), "think" with
 * req.reasoning (a reasoning event first), "manual" (not stepped by the
 * engine thread until a "hold" request arrives), "hold" (fh_submit, on the
 * frontend's I/O thread, steps each "manual" request once, releases it to
 * the engine thread and calls on_hold before returning: the test acts
 * while that I/O thread is busy and events are already queued for it),
 * "eos" (ends with finish_reason "stop" after two tokens, as an EOS would),
 * "calltool" with tools_json and no "<tool>" message rendered (after one
 * text token, one call of the first tool, id "call_fake0", arguments
 * {"city": "Paris"} in two pieces, then finish_reason "tool_calls").
 *
 * The template renders "<role>content\n" per message (string contents
 * only), "think\n" when kwargs mention enable_thinking, then "<assistant>".
 * What the last apply_chat_template and submit got is kept in last_*.
 * A constrained request or one whose tool_choice forces a call gets a
 * scripted answer instead (fake_script.h).
 */
#ifndef SY_TEST_FAKE_HOST_H
#define SY_TEST_FAKE_HOST_H

#include <pthread.h>

#include "switchyard/plugin.h"

typedef struct fake_req fake_req;

typedef struct fake_host {
    sy_host host;
    sy_serving_api api;
    pthread_mutex_t mu;
    pthread_t thread;
    int quit;
    fake_req *reqs;
    uint64_t next_id;
    /* counters, guarded by mu */
    int ready;
    int n_submit, n_cancel, n_done, n_active;
    int port; /* from the plugin's "listening on" log line */
    void (*on_hold)(void *arg); /* guarded by mu; see "hold" above */
    void *on_hold_arg;
    void *dl;
    const sy_plugin_desc *desc;
    void *inst;
    int verbose;
    /* guarded by mu: the last apply_chat_template's arguments (NULL when not given) */
    char *last_messages, *last_tools, *last_kwargs;
    /* guarded by mu: the last submitted request (its pointers cleared) and its strings */
    sy_request last_req;
    char *last_req_tools, *last_req_choice_name, *last_req_constraint;
    char *last_req_constraint_path;
    char last_req_bias[512]; /* the logit_bias pairs as "id:bias id:bias" */
} fake_host;

/* Loads the plugin and starts it with the given "key=value" overrides
 * (NULL-terminated). Returns 0, or -1 with the reason in err. */
int fake_host_start(fake_host *fh, const char *const *overrides, sy_err *err);
void fake_host_stop(fake_host *fh);
int fake_host_counter(fake_host *fh, const int *field);

#endif
