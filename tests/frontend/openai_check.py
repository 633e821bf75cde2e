"""The official openai client against the http frontend (fake host).

Checks that every answer parses into the SDK's models: chat and
completions, streaming and not, usage, logprobs, errors as exceptions, and
breaking out of a stream; models.retrieve; tool calls (whole, streamed and
accumulated by hand and by the SDK's stream helper, pydantic tools);
parse() with a pydantic response_format (the fake host answers an instance
of the schema it was given); refused and unknown fields as 400s naming
them."""
import sys

import openai

base = sys.argv[1]
client = openai.OpenAI(base_url=base, api_key="none", max_retries=0)

models = client.models.list()
assert models.data[0].id == "fake-model", models

chat = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "hi"}],
                                      max_tokens=3, logprobs=True, top_logprobs=2)
assert chat.choices[0].message.content == "t60 t117 t115 ", chat
assert chat.choices[0].finish_reason == "length"
assert chat.usage.completion_tokens == 3
assert chat.choices[0].logprobs.content[0].top_logprobs[0].token == "t61 "

chunks = list(client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "hi"}],
                                             max_tokens=3, stream=True, stream_options={"include_usage": True}))
text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
assert text == "t60 t117 t115 ", text
assert chunks[-1].usage.total_tokens == chunks[-1].usage.prompt_tokens + 3

comp = client.completions.create(model="fake-model", prompt=[5, 6, 7], max_tokens=4, logprobs=1, n=2)
assert [c.text for c in comp.choices] == ["t5 t6 t7 t5 "] * 2, comp
assert comp.choices[0].logprobs.text_offset == [0, 3, 6, 9]

stream = client.completions.create(model="fake-model", prompt="slow", max_tokens=1000, stream=True)
for i, c in enumerate(stream):
    if i == 3:
        break
stream.close()

try:
    client.completions.create(model="fake-model", prompt=[1], max_tokens=0)
    raise AssertionError("max_tokens=0 accepted")
except openai.BadRequestError as e:
    assert e.body["param"] == "max_tokens", e.body
try:
    client.completions.create(model="nope", prompt=[1])
    raise AssertionError("unknown model accepted")
except openai.NotFoundError:
    pass
try:
    client.completions.create(model="fake-model", prompt="busy")
    raise AssertionError("busy accepted")
except openai.RateLimitError:
    pass

# --- issue 18: models.retrieve, tool calls, structured outputs, strict fields
import json
from typing import List, Literal

import pydantic

assert client.models.retrieve("fake-model").id == "fake-model"
try:
    client.models.retrieve("gpt-9")
    raise AssertionError("models.retrieve of an unknown model succeeded")
except openai.NotFoundError as e:
    assert e.body["code"] == "model_not_found", e.body

weather = {"type": "function", "function": {"name": "get_weather", "description": "the weather in a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Brüssel"]},
                                                           "days": {"type": "integer", "minimum": 2}},
                          "required": ["city"]}}}
clock = {"type": "function", "function": {"name": "get_time", "parameters": {"type": "object", "properties": {}}}}
want_args = [{"city": "Brüssel", "days": 3}, {}]

# non-streaming: message.tool_calls, content None, finish_reason tool_calls
r = client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "calltwo"}],
                                   tools=[weather, clock])
m = r.choices[0].message
assert r.choices[0].finish_reason == "tool_calls", r
assert m.content == "Let me check. ", m
assert [c.function.name for c in m.tool_calls] == ["get_weather", "get_time"], m
assert [json.loads(c.function.arguments) for c in m.tool_calls] == want_args, m
assert [c.id for c in m.tool_calls] == ["call_s0", "call_s1"] and all(c.type == "function" for c in m.tool_calls)

# streaming: accumulate delta.tool_calls by index as OpenAI documents it
calls, text, finish = {}, "", None
for chunk in client.chat.completions.create(model="fake-model", messages=[{"role": "user", "content": "calltwo"}],
                                            tools=[weather, clock], stream=True):
    for ch in chunk.choices:
        text += ch.delta.content or ""
        finish = ch.finish_reason or finish
        for tc in ch.delta.tool_calls or []:
            acc = calls.setdefault(tc.index, {"id": None, "name": None, "arguments": ""})
            if tc.id:
                assert acc["id"] is None, "a call's id came twice"
                acc["id"] = tc.id
                assert tc.type == "function"
            if tc.function and tc.function.name:
                acc["name"] = tc.function.name
            if tc.function and tc.function.arguments:
                acc["arguments"] += tc.function.arguments
assert text == "Let me check. " and finish == "tool_calls", (text, finish)
assert [calls[i]["name"] for i in sorted(calls)] == ["get_weather", "get_time"], calls
assert [json.loads(calls[i]["arguments"]) for i in sorted(calls)] == want_args, calls


# the SDK's own stream accumulation, with a pydantic tool it parses
class GetWeather(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="forbid")
    city: Literal["Brüssel"]
    days: int


with client.chat.completions.stream(model="fake-model", messages=[{"role": "user", "content": "weather?"}],
                                    tools=[openai.pydantic_function_tool(GetWeather)],
                                    tool_choice="required") as stream:
    kinds = {ev.type for ev in stream}
    final = stream.get_final_completion()
assert "tool_calls.function.arguments.done" in kinds, kinds
call = final.choices[0].message.tool_calls[0]
assert call.function.name == "GetWeather" and isinstance(call.function.parsed_arguments, GetWeather), call
assert call.function.parsed_arguments.city == "Brüssel"


# structured outputs: parse() with a pydantic model, both spellings of the helper
class Item(pydantic.BaseModel):
    name: str
    qty: int


class Order(pydantic.BaseModel):
    id: int
    items: List[Item]
    rush: bool
    kind: Literal["retail", "wholesale"]


for parse in (client.chat.completions.parse, client.beta.chat.completions.parse):
    done = parse(model="fake-model", messages=[{"role": "user", "content": "an order"}], response_format=Order)
    order = done.choices[0].message.parsed
    assert isinstance(order, Order) and order.kind == "retail" and len(order.items) == 1, done
    assert done.choices[0].finish_reason == "stop"

# strict fields: each refused or unknown field is a 400 naming it
hi = [{"role": "user", "content": "hi"}]
refused = [
    (dict(modalities=["text", "audio"]), "modalities[1]"),
    (dict(audio={"voice": "alloy", "format": "wav"}), "audio"),
    (dict(prediction={"type": "content", "content": "x"}), "prediction"),
    (dict(web_search_options={}), "web_search_options"),
    (dict(functions=[{"name": "f", "parameters": {}}]), "functions"),
    (dict(reasoning_effort="low"), "reasoning_effort"),
    (dict(store=True), "store"),
    (dict(service_tier="flex"), "service_tier"),
    (dict(logit_bias={"abc": 1}), "logit_bias.abc"),
    (dict(logit_bias={"5": 300}), "logit_bias.5"),
    (dict(extra_body={"frobnicate": 1}), "frobnicate"),
    (dict(extra_body={"guided_decoding_backend": "xgrammar"}), "guided_decoding_backend"),
    (dict(tool_choice="required"), "tool_choice"),
    (dict(messages=[{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x/y.png"}}]}]),
     "messages[0].content[0].type"),
    (dict(messages=[{"role": "function", "name": "f", "content": "x"}]), "messages[0].role"),
    (dict(tools=[weather], tool_choice="required",
          response_format={"type": "json_schema", "json_schema": {"name": "o", "schema": {"type": "object"}}}),
     "tool_choice"),
]
for kwargs, param in refused:
    kwargs.setdefault("messages", hi)
    try:
        client.chat.completions.create(model="fake-model", max_tokens=1, **kwargs)
        raise AssertionError("accepted: %r" % (kwargs,))
    except openai.BadRequestError as e:
        assert e.body["param"] == param, (param, e.body)
for kwargs, param in [(dict(best_of=2), "best_of"), (dict(suffix="end"), "suffix"), (dict(echo=True), "echo")]:
    try:
        client.completions.create(model="fake-model", prompt="x", max_tokens=1, **kwargs)
        raise AssertionError("accepted: %r" % (kwargs,))
    except openai.BadRequestError as e:
        assert e.body["param"] == param, (param, e.body)
ok = client.chat.completions.create(model="fake-model", messages=hi, max_tokens=1, user="u", metadata={"a": "b"},
                                    store=False, logit_bias={"5": -100}, seed=1, parallel_tool_calls=False,
                                    tools=[weather], tool_choice="none")
assert ok.choices[0].finish_reason == "length", ok
print("check-openai: ok")
