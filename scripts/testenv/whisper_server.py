#!/usr/bin/env python3
"""A small OpenAI-compatible speech-to-text server over faster-whisper, for the voice tests.

    whisper_server.py MODEL_DIR PORT

Serves on 127.0.0.1:PORT only:
  GET  /health                      200 once the model is loaded
  POST /v1/audio/transcriptions     multipart/form-data: file (required), model (required),
                                    response_format (json | text | verbose_json), language,
                                    prompt; answers like OpenAI's endpoint: {"text": ...}, with
                                    "duration" and "language" for verbose_json.

A request without a file, or with audio that cannot be decoded, gets 400 with OpenAI's error
shape. One transcription runs at a time (the test machine has two cores); others wait their turn.
The bearer token is not checked: it is a test server on loopback.
"""

import email.parser
import email.policy
import io
import json
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from faster_whisper import WhisperModel

MODEL = None
LOCK = threading.Lock()


def form_fields(content_type, body):
    """The fields of a multipart/form-data body: name -> (filename, bytes)."""
    head = ("Content-Type: %s\r\nMIME-Version: 1.0\r\n\r\n" % content_type).encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields = {}
    if not message.is_multipart():
        return fields
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if name:
            fields[name] = (part.get_filename(), part.get_payload(decode=True) or b"")
    return fields


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        sys.stderr.write("whisper_server: %s\n" % (fmt % args))

    def answer(self, status, payload, content_type="application/json"):
        data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def error(self, status, message):
        self.answer(status, {"error": {"message": message, "type": "invalid_request_error"}})

    def do_GET(self):
        if self.path == "/health":
            self.answer(200, {"status": "ok"})
        else:
            self.error(404, "not found")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/audio/transcriptions":
            self.error(404, "not found")
            return
        fields = form_fields(self.headers.get("Content-Type", ""), body)
        if "file" not in fields or not fields["file"][1]:
            self.error(400, "'file' is required")
            return
        if "model" not in fields:
            self.error(400, "'model' is required")
            return
        response_format = (fields.get("response_format", (None, b"json"))[1] or b"json").decode()
        language = (fields.get("language", (None, b""))[1] or b"").decode() or None
        prompt = (fields.get("prompt", (None, b""))[1] or b"").decode() or None
        started = time.monotonic()
        try:
            with LOCK:
                segments, info = MODEL.transcribe(
                    io.BytesIO(fields["file"][1]),
                    language=language,
                    initial_prompt=prompt,
                    beam_size=1,
                    vad_filter=False,
                )
                text = " ".join(segment.text.strip() for segment in segments).strip()
        except Exception as error:  # noqa: BLE001 - undecodable audio is the client's error
            self.error(400, "could not decode the audio: %s" % error)
            return
        sys.stderr.write(
            "whisper_server: %.1f s of audio in %.2f s: %r\n"
            % (info.duration, time.monotonic() - started, text)
        )
        if response_format == "text":
            self.answer(200, (text + "\n").encode(), "text/plain; charset=utf-8")
        elif response_format == "verbose_json":
            self.answer(
                200,
                {"task": "transcribe", "language": info.language,
                 "duration": info.duration, "text": text},
            )
        else:
            self.answer(200, {"text": text})


def main():
    global MODEL
    if len(sys.argv) != 3:
        sys.stderr.write(__doc__)
        sys.exit(2)
    model_dir, port = sys.argv[1], int(sys.argv[2])
    MODEL = WhisperModel(model_dir, device="cpu", compute_type="int8", cpu_threads=2)
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    sys.stderr.write("whisper_server: listening on 127.0.0.1:%d\n" % port)
    server.serve_forever()


if __name__ == "__main__":
    main()
