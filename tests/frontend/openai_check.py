"""The official openai client against the http frontend (fake host).

Checks that every answer parses into the SDK's models: chat and
completions, streaming and not, usage, logprobs, errors as exceptions, and
breaking out of a stream."""
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
print("check-openai: ok")
