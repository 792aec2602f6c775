"""Writes the static upstream for the benchmark: an nginx config whose
locations answer like an OpenAI-compatible provider (a chat completion, a
20-chunk stream, a 503), with no application code in the way."""

import json
import sys

out_dir, fast_port, down_port = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

completion = json.dumps({
    "id": "chatcmpl-bench", "object": "chat.completion", "created": 1767225600, "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello from the benchmark upstream."},
                 "logprobs": None, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 12, "completion_tokens": 8, "total_tokens": 20},
}, separators=(",", ":"))


# Compact chunks: nginx takes at most 4 KiB in one `return` string.
def chunk(delta, finish=None, usage=None):
    c = {"id": "c1", "object": "chat.completion.chunk",
         "choices": [] if usage else [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if usage:
        c["usage"] = usage
    return "data: " + json.dumps(c, separators=(",", ":")) + "\n\n"


events = [chunk({"role": "assistant", "content": ""})]
events += [chunk({"content": f" w{i}"}) for i in range(20)]
events += [chunk({}, "stop"), chunk(None, usage={"prompt_tokens": 12, "completion_tokens": 20, "total_tokens": 32}),
           "data: [DONE]\n\n"]
stream = "".join(events)


def nginx_string(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"


conf = f"""
worker_processes 1;
daemon off;
pid {out_dir}/nginx.pid;
error_log {out_dir}/nginx-error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  keepalive_requests 1000000;
  client_body_buffer_size 64k;
  server {{
    listen 127.0.0.1:{fast_port};
    location = /v1/chat/completions {{ default_type application/json; return 200 {nginx_string(completion)}; }}
    location = /stream/v1/chat/completions {{ default_type text/event-stream; return 200 {nginx_string(stream)}; }}
  }}
  server {{
    listen 127.0.0.1:{down_port};
    location / {{ default_type application/json; return 503 '{{"error":{{"message":"down","type":"server_error"}}}}'; }}
  }}
}}
"""
assert len(nginx_string(stream)) < 4000, "the stream must fit one nginx string"
with open(f"{out_dir}/nginx.conf", "w") as f:
    f.write(conf)
