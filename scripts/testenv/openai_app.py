#!/usr/bin/env python3
"""An app on squidbot's OpenAI-compatible endpoint, played by the official `openai` SDK.

    openai_app.py chat BASE_URL KEY MODEL plain|stream MESSAGES_JSON [--usage] [--header K=V]
    openai_app.py leave BASE_URL KEY MODEL MESSAGES_JSON N    stream, then leave after N pieces
    openai_app.py models BASE_URL KEY

Prints one JSON object: {"text", "usage", "pieces"} for an answer, {"ids"} for the models, or
{"error": {"status", "type", "code", "message"}} when the SDK raised. Run with the venv of
openai_clients.sh. The tests keep the app's side of each conversation, as an app does.
"""
import json
import sys

import openai


def client(base, key, headers=None):
    return openai.OpenAI(base_url=base + "/v1", api_key=key, max_retries=0, timeout=60,
                         default_headers=headers or {})


def failed(error):
    body = getattr(error, "body", None) or {}
    if isinstance(body, dict) and "error" in body and isinstance(body["error"], dict):
        body = body["error"]
    return {"error": {
        "status": getattr(error, "status_code", None),
        "class": type(error).__name__,
        "type": body.get("type") if isinstance(body, dict) else None,
        "code": body.get("code") if isinstance(body, dict) else None,
        "message": str(getattr(error, "message", error)),
    }}


def chat(base, key, model, mode, messages, rest):
    headers = {}
    usage_wanted = "--usage" in rest
    for i, arg in enumerate(rest):
        if arg == "--header":
            name, value = rest[i + 1].split("=", 1)
            headers[name] = value
    c = client(base, key, headers)
    try:
        if mode == "plain":
            r = c.chat.completions.create(model=model, messages=messages)
            return {"text": r.choices[0].message.content, "pieces": 1,
                    "finish": r.choices[0].finish_reason,
                    "usage": r.usage.model_dump() if r.usage else None, "id": r.id}
        extra = {"stream_options": {"include_usage": True}} if usage_wanted else {}
        stream = c.chat.completions.create(model=model, messages=messages, stream=True, **extra)
        text, pieces, usage, finish = "", 0, None, None
        for chunk in stream:
            if chunk.usage:
                usage = chunk.usage.model_dump()
            for choice in chunk.choices:
                if choice.delta.content:
                    text += choice.delta.content
                    pieces += 1
                if choice.finish_reason:
                    finish = choice.finish_reason
        return {"text": text, "pieces": pieces, "usage": usage, "finish": finish}
    except openai.APIError as error:
        return failed(error)


def leave(base, key, model, messages, n):
    c = client(base, key)
    stream = c.chat.completions.create(model=model, messages=messages, stream=True)
    text, pieces = "", 0
    for chunk in stream:
        for choice in chunk.choices:
            if choice.delta.content:
                text += choice.delta.content
                pieces += 1
        if pieces >= n:
            break
    stream.close()
    return {"text": text, "pieces": pieces}


def main():
    command = sys.argv[1]
    if command == "chat":
        base, key, model, mode, messages = sys.argv[2:7]
        out = chat(base, key, model, mode, json.loads(messages), sys.argv[7:])
    elif command == "leave":
        base, key, model, messages, n = sys.argv[2:7]
        out = leave(base, key, model, json.loads(messages), int(n))
    elif command == "models":
        base, key = sys.argv[2:4]
        try:
            out = {"ids": [m.id for m in client(base, key).models.list()]}
        except openai.APIError as error:
            out = failed(error)
    else:
        sys.exit("unknown command " + command)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
