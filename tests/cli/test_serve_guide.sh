#!/bin/sh
# Constrained decoding, logit_bias and tool calls end to end: `switchyard
# serve` on the build's random-weight small model with the Qwen3 chat
# template (hermes tool calls), driven over HTTP by python (urllib) with
# jsonschema as the oracle ($PYTHON_JSONSCHEMA, found by configure):
#   - json_schema outputs at temperature 1, 12 seeds sent at once, all valid;
#   - regex and choice outputs match;
#   - a greedy free request gives the same text alone and batched with them;
#   - logit_bias +100 makes greedy repeat one token, -100 bans it;
#   - tool_choice required (and streaming) gives calls whose arguments
#     validate against the tool's parameters, finish_reason tool_calls, no
#     markup in content; a named function is the one called;
#   - markup that is a special token reaches the parser as one (skip_special
#     or not);
#   - with a <think> token, a constrained answer may think first and the
#     constraint starts after </think>.
set -u
. "${SY_SRCDIR:?run through make check}/tests/faults/lib.sh"
py=${PYTHON_JSONSCHEMA:-}
if [ -z "$py" ] || ! "$py" -c 'import jsonschema' 2>/dev/null; then
    echo "FAIL: PYTHON_JSONSCHEMA (${py:-unset}) cannot import jsonschema (configure looks for one)" >&2
    exit 1
fi
tpl=${SY_SHARED_DIR:?run through make check}/chat-templates/templates/Qwen-Qwen3-0.6B.jinja
[ -f "$tpl" ] || { echo "FAIL: $tpl is missing" >&2; exit 1; }

start_server guide --set "model.chat_template=$tpl" --set model.max_seq_len=2048
grep -q "tool calls: hermes format (from the chat template)" "$tmp/guide.err" &&
    ok "the Qwen3 template's tool-call format is detected (hermes)" ||
    bad "no hermes detection in the log: $(grep -i tool "$tmp/guide.err")"

cat >"$tmp/drive.py" <<'EOF'
import json, re, sys, threading, urllib.request, urllib.error
import jsonschema

base = "http://127.0.0.1:%s" % sys.argv[1]
fails = 0

def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        fails += 1

def post(path, body):
    req = urllib.request.Request(base + path, json.dumps(body).encode(), {"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()

def chat(body):
    status, text = post("/v1/chat/completions", body)
    return status, json.loads(text)

def parallel(bodies):
    out = [None] * len(bodies)
    def run(i):
        out[i] = chat(bodies[i])
    ts = [threading.Thread(target=run, args=(i,)) for i in range(len(bodies))]
    for t in ts: t.start()
    for t in ts: t.join()
    return out

msgs = [{"role": "user", "content": "Describe a person as JSON."}]
schema = {"type": "object", "properties": {
    "name": {"type": "string", "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 120},
    "member": {"type": "boolean"},
    "role": {"enum": ["admin", "user", "guest"]},
    "scores": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 9}, "maxItems": 4},
    "home": {"type": "object", "properties": {"zip": {"type": "string", "pattern": "^[0-9]{5}$"}},
             "required": ["zip"], "additionalProperties": False}},
    "required": ["name", "age", "role", "home"], "additionalProperties": False}
free = {"messages": msgs, "max_tokens": 24, "temperature": 0, "ignore_eos": True}

# The free greedy request alone, then batched with the constrained ones.
status, alone = chat(free)
check(status == 200, "free request alone: %d" % status)
bodies = [free] + [{"messages": msgs, "max_tokens": 400, "temperature": 1, "seed": s,
                    "response_format": {"type": "json_schema", "json_schema": {"name": "person", "schema": schema}}}
                   for s in range(12)]
bodies += [{"messages": msgs, "max_tokens": 60, "temperature": 1, "seed": s, "regex": "[a-f]{3}-[0-9]{2,4}"}
           for s in range(3)]
bodies += [{"messages": msgs, "max_tokens": 60, "temperature": 1, "seed": s,
            "structured_outputs": {"choice": ["red", "green", "blue"]}} for s in range(3)]
res = parallel(bodies)
check(res[0][0] == 200 and res[0][1]["choices"][0]["message"]["content"] == alone["choices"][0]["message"]["content"],
      "the free greedy request gives the same text batched with 18 constrained ones")
valid = 0
for status, r in res[1:13]:
    c = r.get("choices", [{}])[0] if status == 200 else {}
    text = (c.get("message") or {}).get("content") or ""
    try:
        jsonschema.validate(json.loads(text), schema)
        ok = c.get("finish_reason") == "stop"
    except Exception as e:
        ok = False
        print("  invalid (%d, %s): %r: %s" % (status, c.get("finish_reason"), text, e))
    valid += ok
check(valid == 12, "json_schema at temperature 1: %d of 12 outputs validate and ended by the grammar" % valid)
good = sum(1 for s, r in res[13:16] if s == 200 and re.fullmatch("[a-f]{3}-[0-9]{2,4}", r["choices"][0]["message"]["content"]))
check(good == 3, "regex: %d of 3 outputs match" % good)
good = sum(1 for s, r in res[16:19] if s == 200 and r["choices"][0]["message"]["content"] in ("red", "green", "blue"))
check(good == 3, "choice: %d of 3 outputs are one of the choices" % good)

# logit_bias: +100 makes greedy pick one token every time, -100 bans the greedy one.
one = {"prompt": "Once upon a time", "max_tokens": 1, "temperature": 0, "ignore_eos": True, "logprobs": 1}
status, r = post("/v1/completions", one)
first = json.loads(r)["choices"][0]["text"] if status == 200 else None
status, r = post("/v1/completions", dict(one, max_tokens=4, logit_bias={"300": 100}))
t1 = json.loads(r)["choices"][0]["text"] if status == 200 else None
status, r = post("/v1/completions", dict(one, max_tokens=1, logit_bias={"300": 100}))
t0 = json.loads(r)["choices"][0]["text"] if status == 200 else None
check(t0 is not None and t1 == t0 * 4, "logit_bias +100 on token 300: %r is %r four times" % (t1, t0))
status, r = post("/v1/completions", dict(one, logit_bias={"5000": 1}))
check(status == 400 and "logit_bias" in r, "logit_bias outside the vocabulary: 400 naming it (%d)" % status)

# A schema keyword constrained decoding cannot enforce: a 400 whose param is its path.
bad_schema = {"type": "object", "properties": {"u": {"type": "string", "format": "uri"}}}
status, r = post("/v1/chat/completions", {"messages": msgs, "max_tokens": 4, "response_format": {
    "type": "json_schema", "json_schema": {"name": "x", "schema": bad_schema}}})
param = json.loads(r)["error"].get("param") if status == 400 else None
check(param == "response_format.json_schema.schema.properties.u.format",
      "unsupported format: 400 with param %r (%d)" % (param, status))

# Tool calls.
tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
          "parameters": {"type": "object", "properties": {
              "city": {"type": "string", "maxLength": 12},
              "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
              "days": {"type": "integer", "minimum": 1, "maximum": 7}},
              "required": ["city"], "additionalProperties": False}}},
         {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object",
          "properties": {"tz": {"type": "string", "enum": ["UTC", "Europe/Paris"]}}, "required": ["tz"]}}}]
params = {t["function"]["name"]: t["function"]["parameters"] for t in tools}
tmsgs = [{"role": "user", "content": "What's the weather in Paris?"}]

def calls_ok(msg, only=None):
    calls = msg.get("tool_calls") or []
    if not calls:
        return False, "no calls"
    for c in calls:
        name = c["function"]["name"]
        if name not in params or (only and name != only) or not c["id"].startswith("call_"):
            return False, "call %r" % c
        try:
            jsonschema.validate(json.loads(c["function"]["arguments"]), params[name])
        except Exception as e:
            return False, "arguments %r: %s" % (c["function"]["arguments"], e)
    if "<tool_call>" in (msg.get("content") or ""):
        return False, "markup in content"
    return True, "%d calls" % len(calls)

res = parallel([{"messages": tmsgs, "tools": tools, "tool_choice": "required", "max_tokens": 300,
                 "temperature": 1, "seed": s} for s in range(6)] +
               [{"messages": tmsgs, "tools": tools, "max_tokens": 300, "temperature": 1, "seed": s,
                 "tool_choice": {"type": "function", "function": {"name": "get_time"}}} for s in range(2)])
good = 0
for i, (status, r) in enumerate(res):
    c = r.get("choices", [{}])[0] if status == 200 else {}
    fine, why = calls_ok(c.get("message") or {}, "get_time" if i >= 6 else None)
    fine = fine and c.get("finish_reason") == "tool_calls"
    if not fine:
        print("  request %d (%d): %s: %s" % (i, status, why, json.dumps(r)[:400]))
    good += fine
check(good == 8, "tool_choice required / named: %d of 8 answers hold valid calls with finish_reason tool_calls" % good)

# Streaming: the pieces accumulate (index, id and name first) to a valid call.
req = urllib.request.Request(base + "/v1/chat/completions", json.dumps(
    {"messages": tmsgs, "tools": tools, "tool_choice": "required", "max_tokens": 300, "temperature": 1,
     "seed": 3, "stream": True}).encode(), {"content-type": "application/json"})
acc, finish, order_ok = {}, None, True
with urllib.request.urlopen(req, timeout=120) as r:
    for line in r:
        line = line.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        ch = json.loads(line[6:])["choices"][0]
        for d in (ch.get("delta") or {}).get("tool_calls") or []:
            if d["index"] not in acc:
                order_ok &= bool(d.get("id")) and bool((d.get("function") or {}).get("name"))
                acc[d["index"]] = {"id": d.get("id"), "function": {"name": d["function"]["name"], "arguments": ""}}
            acc[d["index"]]["function"]["arguments"] += (d.get("function") or {}).get("arguments") or ""
        finish = ch.get("finish_reason") or finish
fine, why = calls_ok({"tool_calls": [acc[k] for k in sorted(acc)]})
check(fine and order_ok and finish == "tool_calls", "streamed tool call accumulates to a valid call: %s, %s" % (why, finish))
sys.exit(1 if fails else 0)
EOF
"$py" "$tmp/drive.py" "$port"
if [ $? -eq 0 ]; then ok "python checks"; else bad "python checks"; fi
wait_drained guide
stop_server guide

# Markup as special tokens: the small model's tokenizer with <tool_call> and
# </tool_call> added as special tokens (as GLM's and others' are). A forced
# call starts with the special token itself (the grammar admits it; the
# detokeniser skips special tokens), and the parser still reads the call.
m2=$tmp/special-markers
"$SY_BUILDDIR/sy-mkmodel" --preset small --vocab 1032 --out "$m2" >/dev/null || bad "sy-mkmodel --vocab 1032"
cat >"$tmp/retok.py" <<'EOF'
import json, shutil, sys
src, dst = sys.argv[1], sys.argv[2]
t = json.load(open(src + "/tokenizer.json"))
for i, text, special in ((1024, "<tool_call>", True), (1025, "</tool_call>", True), (1026, "<think>", False),
                         (1027, "</think>", False)):
    t["added_tokens"].append({"id": i, "content": text, "single_word": False, "lstrip": False, "rstrip": False,
                              "normalized": False, "special": special})
json.dump(t, open(dst + "/tokenizer.json", "w"))
shutil.copy(src + "/tokenizer_config.json", dst + "/tokenizer_config.json")
for f in ("config.json", "generation_config.json"):
    c = json.load(open(dst + "/" + f))
    c["eos_token_id"] = 1021
    json.dump(c, open(dst + "/" + f, "w"))
EOF
"$py" "$tmp/retok.py" "$small" "$m2" || bad "adding special tokens to the tokenizer"
start_server markers --model "$m2" --set "model.chat_template=$tpl"
cat >"$tmp/markers.py" <<'EOF'
import json, sys, urllib.request
body = {"messages": [{"role": "user", "content": "weather?"}], "max_tokens": 120, "temperature": 1, "logprobs": True,
        "tool_choice": "required", "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
            "type": "object", "properties": {"city": {"type": "string", "maxLength": 6}}, "required": ["city"]}}}]}
bad = 0
for seed in range(3):
    req = urllib.request.Request("http://127.0.0.1:%s/v1/chat/completions" % sys.argv[1],
                                 json.dumps(dict(body, seed=seed)).encode(), {"content-type": "application/json"})
    c = json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]
    first = [t["token"] for t in c["logprobs"]["content"]][:1]
    calls = c["message"].get("tool_calls") or []
    fine = (c["finish_reason"] == "tool_calls" and first == ["<tool_call>"] and not c["message"].get("content") and
            len(calls) == 1 and "city" in json.loads(calls[0]["function"]["arguments"]))
    if not fine:
        print("  seed %d: %s" % (seed, json.dumps(c)[:500]))
    bad += not fine
sys.exit(1 if bad else 0)
EOF
"$py" "$tmp/markers.py" "$port" && ok "special-token markup: the call starts with the <tool_call> token and parses" ||
    bad "special-token markup"
# <think> as a Qwen3-style added token: the constraint lets the model open it
# first, leaves the thinking free (here logit_bias closes it at once), and
# starts after </think>.
cat >"$tmp/think.py" <<'EOF'
import json, sys, urllib.request
schema = {"type": "object", "properties": {"a": {"enum": [1, 2]}}, "required": ["a"], "additionalProperties": False}
body = {"messages": [{"role": "user", "content": "json?"}], "max_tokens": 60, "temperature": 0, "logprobs": True,
        "logit_bias": {"1026": 50, "1027": 100},
        "response_format": {"type": "json_schema", "json_schema": {"name": "a", "schema": schema}}}
req = urllib.request.Request("http://127.0.0.1:%s/v1/chat/completions" % sys.argv[1], json.dumps(body).encode(),
                             {"content-type": "application/json"})
c = json.load(urllib.request.urlopen(req, timeout=120))["choices"][0]
toks = [t["token"] for t in c["logprobs"]["content"]]
fine = toks[:2] == ["<think>", "</think>"] and c["finish_reason"] == "stop" and \
    json.loads(c["message"]["content"]) in ({"a": 1}, {"a": 2})
if not fine:
    print("  %s" % json.dumps(c)[:600])
sys.exit(0 if fine else 1)
EOF
"$py" "$tmp/think.py" "$port" && ok "<think> first, then </think>, then the constrained answer" ||
    bad "the <think> rule with a <think> token"
stop_server markers
finish
