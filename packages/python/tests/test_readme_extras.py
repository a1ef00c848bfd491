"""The README's LangGraph and Agents SDK examples, run as written (the Agents one against the
scripted OpenAI-compatible server, through the environment the OpenAI client reads)."""

import re
import subprocess
import sys

from conftest import PACKAGE_ROOT
from scripted_llm import ScriptedServer, completion, tool_call


def examples():
    readme = (PACKAGE_ROOT / "README.md").read_text()
    section = readme.split("## In LangGraph and the OpenAI Agents SDK", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readme_examples_run(tmp_path):
    graph, agents = examples()
    out = subprocess.run([sys.executable, "-c", graph], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "The user is vegetarian"

    answers = [tool_call("recall", {"query": "vendor CSV encoding"}), completion("utf-8-sig")]
    with ScriptedServer(answers) as server:
        env = {**__import__("os").environ, "OPENAI_BASE_URL": server.url, "OPENAI_API_KEY": "test",
               "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        out = subprocess.run([sys.executable, "-c", agents], cwd=tmp_path, capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        tool = [m for m in server.requests[1]["body"]["messages"] if m["role"] == "tool"][0]
    assert "utf-8-sig" in tool["content"]
    assert out.stdout.strip() == "utf-8-sig success"
