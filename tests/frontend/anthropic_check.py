"""The official anthropic client against the http frontend's Messages API
(fake host, tests/frontend/fake_host.h): messages.create, messages.stream
with the SDK's accumulated final message, thinking blocks, a tool-use round
trip, count_tokens, and errors as the SDK's exceptions."""
import sys

import anthropic

base = sys.argv[1]
client = anthropic.Anthropic(base_url=base, api_key="none", max_retries=0)
M = "fake-model"
hi = [{"role": "user", "content": "hi"}]

msg = client.messages.create(model=M, max_tokens=3, messages=hi)
assert isinstance(msg, anthropic.types.Message), msg
assert msg.id.startswith("msg_") and msg.role == "assistant" and msg.model == M, msg
assert [b.type for b in msg.content] == ["text"] and msg.content[0].text == "t60 t117 t115 ", msg
assert msg.stop_reason == "max_tokens" and msg.stop_sequence is None, msg
assert msg.usage.input_tokens == 20 and msg.usage.output_tokens == 3, msg.usage

with client.messages.stream(model=M, max_tokens=3, messages=hi) as s:
    text = "".join(s.text_stream)
    final = s.get_final_message()
assert text == "t60 t117 t115 ", text
assert final.content[0].text == text and final.stop_reason == "max_tokens", final
assert final.usage.input_tokens == 20 and final.usage.output_tokens == 3, final.usage

stop = client.messages.create(model=M, max_tokens=9, stop_sequences=["t115"], messages=hi)
assert stop.stop_reason == "stop_sequence" and stop.stop_sequence == "t115", stop
assert stop.content[0].text == "t60 t117 ", stop

with client.messages.stream(model=M, max_tokens=2000, thinking={"type": "enabled", "budget_tokens": 1024},
                            messages=[{"role": "user", "content": "hmm eos"}]) as s:
    kinds = [e.type for e in s]
    final = s.get_final_message()
assert "thinking" in kinds, kinds
assert [b.type for b in final.content] == ["thinking", "text"], final
assert final.content[0].thinking == "pondering" and final.stop_reason == "end_turn", final

tools = [{"name": "get_weather", "description": "The weather in a city",
          "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}]
ask = [{"role": "user", "content": "calltool: the weather in Paris?"}]
call = client.messages.create(model=M, max_tokens=50, tools=tools, messages=ask)
assert call.stop_reason == "tool_use", call
use = call.content[-1]
assert use.type == "tool_use" and use.name == "get_weather" and use.input == {"city": "Paris"}, call
assert use.id.startswith("toolu_"), use.id

with client.messages.stream(model=M, max_tokens=50, tools=tools, messages=ask) as s:
    streamed = s.get_final_message()
assert streamed.stop_reason == "tool_use" and streamed.content[-1].input == {"city": "Paris"}, streamed
assert streamed.content[-1].id == use.id, streamed

# The SDK's own blocks go back as the assistant turn; the result comes as a tool_result.
answer = client.messages.create(model=M, max_tokens=3, tools=tools, messages=ask + [
    {"role": "assistant", "content": call.content},
    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "18C, sunny"}]}])
assert answer.stop_reason == "max_tokens" and [b.type for b in answer.content] == ["text"], answer

count = client.messages.count_tokens(model=M, messages=hi)
assert count.input_tokens == 20, count

try:
    client.messages.create(model="claude-nope", max_tokens=3, messages=hi)
    raise AssertionError("unknown model accepted")
except anthropic.NotFoundError as e:
    assert e.body["error"]["type"] == "not_found_error", e.body
try:
    client.messages.create(model=M, max_tokens=3, messages=[{"role": "user", "content": [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])
    raise AssertionError("image accepted")
except anthropic.BadRequestError as e:
    assert "messages.0.content.0.type" in e.body["error"]["message"], e.body
try:
    client.messages.create(model=M, max_tokens=3, messages=[{"role": "user", "content": "busy"}])
    raise AssertionError("busy accepted")
except anthropic.APIStatusError as e:
    assert e.status_code == 529 and e.body["error"]["type"] == "overloaded_error", e.body
try:
    with client.messages.stream(model=M, max_tokens=9, messages=[{"role": "user", "content": "fail"}]) as s:
        for _ in s:
            pass
    raise AssertionError("a failed stream ended quietly")
except anthropic.APIStatusError as e:
    assert "fake engine fault" in str(e), e
print("check-anthropic: ok")
