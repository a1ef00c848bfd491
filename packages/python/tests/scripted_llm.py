"""A local OpenAI-compatible server for tests: answers from a script, records what it was asked."""

import http.server
import json
import threading
import time
from typing import Any, Callable, Dict, List, Optional


class ScriptedServer:
    """`answers`: a list of {status, headers?, body? | body_text?, delay_ms?} given in order, or
    `route(request_body) -> answer` for answers by request. `requests` records each request as
    {"body": parsed JSON, "headers": lower-cased header dict}."""

    def __init__(self, answers: Optional[List[Dict[str, Any]]] = None,
                 route: Optional[Callable[[Dict[str, Any]], Dict[str, Any]]] = None):
        self.answers = list(answers or [])
        self.route = route
        self.requests: List[Dict[str, Any]] = []
        server = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                try:
                    body = json.loads(raw)
                except ValueError:
                    body = raw.decode("utf-8", "replace")
                server.requests.append({"body": body, "headers": {k.lower(): v for k, v in self.headers.items()},
                                        "path": self.path})
                if server.route is not None:
                    answer = server.route(body)
                elif server.answers:
                    answer = server.answers.pop(0)
                else:
                    answer = {"status": 500, "body_text": "no scripted answer"}
                if answer.get("delay_ms"):
                    time.sleep(answer["delay_ms"] / 1000)
                data = (answer["body_text"].encode() if "body_text" in answer
                        else json.dumps(answer.get("body", {})).encode())
                try:
                    self.send_response(answer.get("status", 200))
                    self.send_header("Content-Type", "text/plain" if "body_text" in answer else "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for k, v in (answer.get("headers") or {}).items():
                        self.send_header(k, v)
                    self.end_headers()
                    self.wfile.write(data)
                except OSError:
                    pass  # the client gave up (a timeout test)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self) -> "ScriptedServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def completion(content: str, prompt_tokens: int = 50, completion_tokens: int = 10,
               finish_reason: str = "stop") -> Dict[str, Any]:
    return {"status": 200, "body": {"choices": [{"index": 0, "message": {"role": "assistant", "content": content},
                                                 "finish_reason": finish_reason}],
                                    "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens}}}


def operation(body: Dict[str, Any]) -> Optional[str]:
    """The engine's operation, from the JSON schema's name (json_mode json_schema)."""
    return ((body.get("response_format") or {}).get("json_schema") or {}).get("name")


def tool_call(name: str, arguments: Dict[str, Any], call_id: str = "call_1") -> Dict[str, Any]:
    """A chat completion that calls one tool (what an agent framework's model turn looks like)."""
    message = {"role": "assistant", "content": None,
               "tool_calls": [{"id": call_id, "type": "function",
                               "function": {"name": name, "arguments": json.dumps(arguments)}}]}
    return {"status": 200, "body": {"id": f"chat-{call_id}", "object": "chat.completion", "created": 0,
                                    "model": "scripted",
                                    "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}],
                                    "usage": {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}}}
