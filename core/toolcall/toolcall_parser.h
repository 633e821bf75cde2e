/*
 * The tool-call parser's state, shared by the engine and its families
 * (toolcall_parse.c) and what they write with (toolcall_emit.c).
 */
#ifndef SY_TOOLCALL_PARSER_H
#define SY_TOOLCALL_PARSER_H

#include "toolcall/toolcall_internal.h"

/* Every state of every family; each family uses its own subset. */
typedef enum tc_state {
    S_TEXT,       /* content, waiting for a call to start */
    S_DONE,       /* final seen */
    /* JSON arguments through the normaliser, then the family's after-state */
    S_JSON,
    /* GLM */
    S_G_NAME,
    S_G_ARGS,
    S_G_KEY,
    S_G_PREVAL,
    S_VAL_STR, /* GLM and DSML raw values */
    S_VAL_RAW,
    /* DeepSeek V3 / V3.1 */
    S_D_CALLS,
    S_D_TYPE,
    S_D_NAME,
    S_D_PREJSON,
    S_D_POST,
    /* DeepSeek V3.2 DSML */
    S_M_CALLS,
    S_M_INVOKE,
    S_M_PARAMS,
    S_M_PARAM,
    /* JSON wrapper objects {"name":..., "arguments":...} (Hermes, Llama, Mistral) */
    S_W,
    S_H_POST,
    S_L_START,
    S_L_CALLS,
    S_L_SEP,
    S_MI_AFTER,
    S_MI_ARR,
    S_MI_ARR_SEP,
    S_MI_NAME,
    S_MI_ID,
    /* Kimi */
    S_K_CALLS,
    S_K_HEAD,
    S_K_POST,
    /* Harmony */
    S_HA_HDR,
    S_HA_BODY,
    S_HA_POST
} tc_state;

/* Where the wrapper object's current member value goes. */
enum { W_OPEN, W_KEY, W_KEYSTR, W_COLON, W_VAL, W_VALIN, W_AFTER };
enum { WK_NAME, WK_ARGS, WK_ARGSTR, WK_OTHER };

struct sy_tool_parser {
    const sy_tool_family *f;
    const sy_tools *tools;
    uint64_t rng;
    sy_buf in; /* pending input */
    tc_state s;
    tc_state after_json; /* where S_JSON goes when the object is complete */
    bool skip_ws;  /* drop whitespace before content (after a call) */
    bool hold_ws;  /* the output so far is whitespace, held in ws */
    sy_buf ws;
    bool oom;
    sy_tool_out *out;
    /* the call being read */
    int32_t n_calls;
    bool in_call, args_open;
    size_t n_args;
    sy_buf name, id, key, val, hdr, scratch, pend;
  tc_jv jv;
    sy_buf jout;
  tc_vtype vtype;
    bool val_is_dsml;
    /* wrapper */
    int w, wk;
    bool w_name_done, w_args_done;
    /* harmony body sink: 0 content, 1 reasoning */
    int body;
};


void tc_app(sy_tool_parser *p, sy_buf *b, const char *s, size_t n);
void tc_call_begin(sy_tool_parser *p, const char *name, size_t name_len, const char *id, size_t id_len);
void tc_call_args(sy_tool_parser *p, const char *s, size_t n);
void tc_call_args_str(sy_tool_parser *p, const char *s);
void tc_call_end(sy_tool_parser *p);
void tc_fix_pointers(sy_tool_out *o);
void tc_to_content(sy_tool_parser *p, const char *s, size_t n);
void tc_trim(const char **s, size_t *n);
void tc_value_begin(sy_tool_parser *p, tc_vtype vt);
void tc_value_text(sy_tool_parser *p, const char *s, size_t n);
void tc_value_end(sy_tool_parser *p);
void tc_args_close_kv(sy_tool_parser *p);
void tc_json_begin(sy_tool_parser *p, tc_state after);
void tc_json_drain(sy_tool_parser *p);
bool tc_run_json(sy_tool_parser *p);
void tc_json_abort(sy_tool_parser *p);
void tc_wrapper_begin(sy_tool_parser *p, tc_state after);
bool tc_run_wrapper(sy_tool_parser *p);
void tc_wrapper_abort(sy_tool_parser *p);
bool tc_is_ws(char c);

#endif
