"""agentnode's Python agent shim: one run of an AgentNode Python agent.

Run as

    python3 -I -S -B agentnode_agent.py PACK_DIR ENTRYPOINT CONTEXT_JSON

in the agent sandbox, beside agentnode_tool.py (whose import, path and
encoding rules it reuses). It speaks agentnode's agent protocol
(specs/agent.md) with the host on its standard streams: it reads the tool
request {"tool": NAME, "input": {...}}, calls the agent's ENTRYPOINT
("module.path:function") as AgentNode's SDK does, func(context, **kwargs),
and writes the agent's result line. The context has the interface of the
SDK's AgentContext (goal, run_tool, call_llm, call_llm_text,
next_iteration, the counters, ...); each of its tool and LLM calls is one
run_tool or call_llm request the host answers, so every call goes through
the host's pipeline, Guard, the broker and the audit log, and the host's
limits hold whatever this process does.

CONTEXT_JSON is written by the host from the manifest and its effective
limits: {"agent", "run_id", "goal", "system_prompt", "allowed_packages",
"max_tool_calls", "max_iterations", "stop_on_consecutive_errors", "retry":
{"enabled", "max_retries", "backoff_base", "backoff_max"}, "llm":
{"enabled", "provider", "model", "max_calls"}}.

The input keys "goal", "llm" and "timeout" are taken by the runner as in the
SDK (run_agent's own parameters): "goal" overrides the manifest's goal, the
other two are dropped; the rest are the agent's kwargs. The result is
{"type": "result", "ok": true, "result": ...} (the tool shim's fallback for
what JSON cannot hold), or ok false with "Type: message" for whatever the
agent raised. The protocol's descriptors are moved out of the agent's way
before the package is imported: descriptor 1 and sys.stdout become stderr
(what the agent prints is the run's log), descriptor 0 and sys.stdin
/dev/null. Python 3.8 or later, standard library only. specs/python.md and
specs/agent.md describe it.
"""

import os
import sys

# What a reply line from the host may hold: a tool's result (4 MiB) with
# its JSON framing and escapes.
MAX_REPLY = 32 * 1024 * 1024

# The host refuses an agent's line above 4 MiB without its newline
# (specs/agent.md); a larger result is reported as the agent's error.
MAX_RESULT = 4 * 1024 * 1024
RESULT_HEAD = b'{"type": "result", '

# Input keys run_agent takes itself in AgentNode's SDK (never kwargs).
RUNNER_KEYS = ("goal", "llm", "timeout")

_ROLES = ("system", "user", "assistant")


def _load_tool_shim():
    """agentnode_tool.py from this shim's directory, as a private module."""
    import importlib.util

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "agentnode_tool.py")
    spec = importlib.util.spec_from_file_location("_agentnode_tool", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


# ---------------------------------------------------------------------------
# The SDK's types (agentnode_sdk.runtimes.agent_runner, agentnode_sdk.models)
# ---------------------------------------------------------------------------


class AgentLimitExceeded(RuntimeError):
    """A hard limit of the agent (tool calls, iterations, LLM calls)."""


class AgentTerminated(RuntimeError):
    """The agent was stopped by a termination condition."""


class LLMCallError(RuntimeError):
    """call_llm was refused by the host or failed; code is the reason code."""

    def __init__(self, message, code=None):
        RuntimeError.__init__(self, message)
        self.code = code


class RunToolResult:
    def __init__(self, success, result=None, error=None, mode_used="agentnode",
                 duration_ms=0.0, timed_out=False, run_id=None):
        self.success = success
        self.result = result
        self.error = error
        self.mode_used = mode_used
        self.duration_ms = duration_ms
        self.timed_out = timed_out
        self.run_id = run_id

    def __repr__(self):
        return "RunToolResult(success=%r, result=%r, error=%r, mode_used=%r)" % (
            self.success, self.result, self.error, self.mode_used)


class LLMResult:
    def __init__(self, content, tool_calls=None, usage=None, model=None, finish_reason=None):
        self.content = content
        self.tool_calls = tool_calls
        self.usage = usage
        self.model = model
        self.finish_reason = finish_reason

    def __repr__(self):
        return "LLMResult(content=%r, model=%r)" % (self.content, self.model)


class ToolContext:
    def __init__(self, allowed_packages=None, tool_specs=None):
        self.allowed_packages = list(allowed_packages or [])
        self.tool_specs = list(tool_specs or [])

    @property
    def has_tools(self):
        return len(self.tool_specs) > 0


class _CircuitBreaker:
    """Per-package breaker as in the SDK: open after 3 failures, 30 s."""

    def __init__(self, failure_threshold=3, cooldown=30.0):
        self._threshold = failure_threshold
        self._cooldown = cooldown
        self._failures = 0
        self._state = "closed"
        self._last = 0.0

    @property
    def state(self):
        import time

        if self._state == "open" and time.monotonic() - self._last >= self._cooldown:
            return "half_open"
        return self._state

    @property
    def is_open(self):
        return self.state == "open"

    def record_success(self):
        self._failures = 0
        self._state = "closed"

    def record_failure(self):
        import time

        self._failures += 1
        self._last = time.monotonic()
        if self._failures >= self._threshold:
            self._state = "open"

    def to_dict(self):
        return {"state": self.state, "failure_count": self._failures,
                "failure_threshold": self._threshold, "cooldown": self._cooldown}


# ---------------------------------------------------------------------------
# The protocol channel
# ---------------------------------------------------------------------------


class _Channel:
    """Requests to the host and its replies, one at a time (a lock keeps
    an agent's threads from interleaving them)."""

    def __init__(self, reader, wfd, encode):
        import threading

        self._r = reader
        self._w = wfd
        self._encode = encode
        self._next = 1
        self._lock = threading.Lock()

    def write(self, body):
        data = memoryview(body + b"\n")
        while data:
            n = os.write(self._w, data)
            data = data[n:]

    def request(self, msg):
        import json

        with self._lock:
            rid = self._next
            self._next += 1
            msg = dict(msg, id=rid)
            self.write(self._encode(msg))
            line = self._r.readline(MAX_REPLY + 1)
            if not line.endswith(b"\n"):
                raise ConnectionError("the host closed the agent protocol (the run is ending)")
            reply = json.loads(line.decode("utf-8"))
            if not isinstance(reply, dict) or reply.get("id") != rid:
                raise ConnectionError("the host's reply does not answer request %d" % rid)
            return reply


# ---------------------------------------------------------------------------
# AgentContext
# ---------------------------------------------------------------------------


class AgentContext:
    """The context an agent's entrypoint gets: AgentNode's AgentContext
    (contract v1) over agentnode's agent protocol.

    The checks here (allowlist, max_tool_calls, max_iterations, the LLM
    budget) answer an agent with the SDK's exceptions before anything is
    sent; the host enforces the allowlist, the tool and LLM budgets, Guard
    and the wall clock again on every request, whatever this object says.
    """

    def __init__(self, channel, cfg, goal):
        self._ch = channel
        self._agent_slug = str(cfg.get("agent") or "")
        self._run_id = cfg.get("run_id")
        self._goal = goal
        self._allowed_packages = list(cfg.get("allowed_packages") or [])
        self._max_tool_calls = int(cfg.get("max_tool_calls") or 0)
        self._max_iterations = int(cfg.get("max_iterations") or 0)
        self._stop_on_consecutive_errors = int(cfg.get("stop_on_consecutive_errors") or 3)
        self._system_prompt = cfg.get("system_prompt") or None
        retry = cfg.get("retry") or {}
        self._retry_enabled = bool(retry.get("enabled", True))
        self._max_retries = int(retry.get("max_retries", 2))
        self._backoff_base = float(retry.get("backoff_base", 1.0))
        self._backoff_max = float(retry.get("backoff_max", 10.0))
        llm = cfg.get("llm") or {}
        self._llm = None
        if llm.get("enabled"):
            self._llm = {"provider": llm.get("provider") or None, "model": llm.get("model") or None,
                         "client": None}
        self._llm_max_calls = int(llm.get("max_calls") or 0)

        self._tool_calls_made = 0
        self._consecutive_errors = 0
        self._iteration = 0
        self._llm_calls_made = 0
        self._llm_requests = 0
        self._circuit_breakers = {}
        self._total_retries = 0

    # --- properties (the SDK's) ---

    @property
    def goal(self):
        return self._goal

    @property
    def allowed_packages(self):
        return list(self._allowed_packages)

    @property
    def tool_calls_made(self):
        return self._tool_calls_made

    @property
    def tools_remaining(self):
        return max(0, self._max_tool_calls - self._tool_calls_made)

    @property
    def max_tool_calls(self):
        return self._max_tool_calls

    @property
    def max_iterations(self):
        return self._max_iterations

    @property
    def iteration(self):
        return self._iteration

    @property
    def run_id(self):
        return self._run_id

    @property
    def llm(self):
        return dict(self._llm) if self._llm is not None else None

    @property
    def system_prompt(self):
        return self._system_prompt

    @property
    def llm_calls_made(self):
        return self._llm_calls_made

    # --- LLM access ---

    def call_llm(self, messages, *, tool_context=None):
        """One chat completion through the host's broker (call_llm)."""
        if self._llm is None:
            raise RuntimeError(
                "Agent '%s' requires an LLM but none is bound. "
                "Ensure the runtime provides an LLM when starting this agent." % self._agent_slug)
        msgs = list(messages)
        if self._system_prompt and not any(isinstance(m, dict) and m.get("role") == "system" for m in msgs):
            msgs.insert(0, {"role": "system", "content": self._system_prompt})
        wire = []
        for i, m in enumerate(msgs):
            if not isinstance(m, dict):
                raise TypeError("messages[%d] is not a dict with role and content" % i)
            role, content = m.get("role"), m.get("content")
            if role not in _ROLES:
                raise ValueError("messages[%d].role %r is not one of %s" % (i, role, ", ".join(_ROLES)))
            if content is None:
                content = ""
            if not isinstance(content, str):
                raise TypeError("messages[%d].content is not a string" % i)
            wire.append({"role": role, "content": content})
        if not wire:
            raise ValueError("messages must not be empty")
        model = self._llm.get("model")
        if not model:
            raise RuntimeError(
                "Agent '%s' has no model to call: the host names none "
                "(agent_sandbox.llm.allowed_models or llm_access.allowed_models)" % self._agent_slug)
        if self._llm_requests >= self._llm_max_calls:
            raise AgentLimitExceeded("Agent '%s' exceeded its LLM calls (%d)" % (self._agent_slug, self._llm_max_calls))
        self._llm_requests += 1
        req = {"type": "call_llm", "model": model, "messages": wire}
        if self._llm.get("provider"):
            req["provider"] = self._llm["provider"]
        reply = self._ch.request(req)
        if not reply.get("ok"):
            code = reply.get("code")
            msg = str(reply.get("error") or "the LLM call failed")
            raise LLMCallError("[%s] %s" % (code, msg) if code else msg, code)
        result = reply.get("result") or {}
        self._llm_calls_made += 1
        return LLMResult(content=str(result.get("content") or ""), model=model)

    def call_llm_text(self, messages, **kwargs):
        return self.call_llm(messages, **kwargs).content

    def run_llm_tool_loop(self, messages, *, max_rounds=8):
        """The SDK's tool loop. The host's broker returns no tool calls, so
        the first reply is the final one."""
        if self._llm is None:
            raise RuntimeError("Agent '%s' requires an LLM for tool loop." % self._agent_slug)
        result = None
        for _ in range(max(1, max_rounds)):
            result = self.call_llm(list(messages), tool_context=self.allowed_tool_context())
            if not result.tool_calls:
                break
        return result

    def allowed_tool_context(self):
        """The allowed packages; no tool specs (the host's broker has no
        tool calling)."""
        return ToolContext(allowed_packages=self._allowed_packages)

    # --- tools ---

    def _get_breaker(self, slug):
        if slug not in self._circuit_breakers:
            self._circuit_breakers[slug] = _CircuitBreaker()
        return self._circuit_breakers[slug]

    def _check_allowlist(self, slug):
        if slug not in self._allowed_packages:
            raise PermissionError(
                "Agent '%s' is not allowed to use package '%s'. Allowed: %s"
                % (self._agent_slug, slug, self._allowed_packages))

    def _check_tool_limit(self):
        if self._tool_calls_made >= self._max_tool_calls:
            raise AgentLimitExceeded(
                "Agent '%s' exceeded max_tool_calls (%d)" % (self._agent_slug, self._max_tool_calls))

    def _dispatch_tool(self, slug, tool_name, kwargs):
        """One run_tool request; the result as the SDK's RunToolResult. A
        refusal by the host has its reason code as mode_used."""
        import time

        req = {"type": "run_tool", "package": slug, "input": kwargs}
        if tool_name:
            req["tool"] = tool_name
        t0 = time.monotonic()
        reply = self._ch.request(req)
        ms = round((time.monotonic() - t0) * 1000, 1)
        if reply.get("ok"):
            result = RunToolResult(True, result=reply.get("result"), duration_ms=ms, run_id=self._run_id)
        else:
            result = RunToolResult(False, error=str(reply.get("error") or "the tool failed"),
                                   mode_used=reply.get("code") or "agentnode", duration_ms=ms,
                                   timed_out=reply.get("code") == "timeout", run_id=self._run_id)
        breaker = self._get_breaker(slug)
        if result.success:
            breaker.record_success()
            self._consecutive_errors = 0
        else:
            breaker.record_failure()
            self._consecutive_errors += 1
            if self._consecutive_errors >= self._stop_on_consecutive_errors:
                raise AgentTerminated("Agent '%s' stopped after %d consecutive tool errors"
                                      % (self._agent_slug, self._consecutive_errors))
        return result

    def _retryable(self, result):
        # A refusal by the host (a reason code) is not retried: it would be
        # refused again, and the host ends a run after 16 refusals.
        return not result.success and result.mode_used == "agentnode"

    def _retry(self, slug, tool_name, kwargs, result, max_retries, base, cap):
        import time

        for attempt in range(1, max_retries + 1):
            if self._tool_calls_made >= self._max_tool_calls or self._get_breaker(slug).is_open:
                break
            time.sleep(min(base * (2 ** (attempt - 1)), cap))
            self._tool_calls_made += 1
            self._total_retries += 1
            result = self._dispatch_tool(slug, tool_name, kwargs)
            if not self._retryable(result):
                break
        return result

    def run_tool(self, slug, tool_name=None, *, retry=None, **kwargs):
        """Run a tool of an allowed package (a nested agentnode run)."""
        self._check_allowlist(slug)
        self._check_tool_limit()
        self._tool_calls_made += 1
        if self._get_breaker(slug).is_open:
            return RunToolResult(False, error="Circuit breaker open for '%s' — tool is temporarily "
                                 "unavailable after repeated failures." % slug, mode_used="circuit_breaker")
        result = self._dispatch_tool(slug, tool_name, kwargs)
        should_retry = self._retry_enabled if retry is None else retry
        if should_retry and self._retryable(result):
            result = self._retry(slug, tool_name, kwargs, result, self._max_retries,
                                 self._backoff_base, self._backoff_max)
        return result

    def run_tool_with_retry(self, slug, tool_name=None, *, max_retries=3, backoff_base=1.0,
                            backoff_max=15.0, **kwargs):
        self._check_allowlist(slug)
        self._check_tool_limit()
        self._tool_calls_made += 1
        result = self._dispatch_tool(slug, tool_name, kwargs)
        if self._retryable(result):
            result = self._retry(slug, tool_name, kwargs, result, max_retries, backoff_base, backoff_max)
        return result

    def run_tool_with_fallback(self, slug, tool_name=None, *, fallbacks=None, **kwargs):
        result = self.run_tool(slug, tool_name, retry=False, **kwargs)
        if result.success or not fallbacks:
            return result
        for fb in fallbacks:
            if fb not in self._allowed_packages:
                continue
            result = self.run_tool(fb, tool_name, retry=True, **kwargs)
            if result.success:
                return result
        return result

    def try_tool(self, slug, tool_name=None, **kwargs):
        try:
            return self.run_tool(slug, tool_name, **kwargs)
        except (PermissionError, AgentLimitExceeded):
            return None

    def is_tool_available(self, slug):
        return slug in self._allowed_packages and not self._get_breaker(slug).is_open

    def tool_health(self, slug):
        return {"slug": slug, "allowed": slug in self._allowed_packages,
                "circuit_breaker": self._get_breaker(slug).to_dict()}

    # --- iterations ---

    def next_iteration(self):
        """Mark the start of an iteration; past max_iterations it raises."""
        self._iteration += 1
        if self._iteration > self._max_iterations:
            raise AgentLimitExceeded(
                "Agent '%s' exceeded max_iterations (%d)" % (self._agent_slug, self._max_iterations))


# ---------------------------------------------------------------------------
# The run
# ---------------------------------------------------------------------------


def _parse_agent_entrypoint(tool, ep):
    module, sep, func = ep.rpartition(":")
    if not sep:
        raise ValueError("invalid agent entrypoint %r: want module.path:function" % ep)
    return tool._parse_entrypoint(ep)


def _run(tool, argv, reader, channel):
    import importlib
    import json

    args = argv[1:]
    if len(args) != 3:
        raise ValueError("usage: agentnode_agent.py PACK_DIR ENTRYPOINT CONTEXT_JSON")
    if not (sys.flags.isolated and sys.flags.no_site):
        raise RuntimeError("agentnode_agent.py must run under python3 -I -S")
    pack, entrypoint, cfg = os.path.abspath(args[0]), args[1], json.loads(args[2])
    if not isinstance(cfg, dict):
        raise ValueError("CONTEXT_JSON is not a JSON object")
    if not os.path.isdir(pack):
        raise FileNotFoundError("package directory %s does not exist" % pack)
    _, inp = tool._read_request(_FirstLine(reader))
    goal = inp.pop("goal", None)
    for key in RUNNER_KEYS:
        inp.pop(key, None)
    if not isinstance(goal, str) or not goal:
        goal = str(cfg.get("goal") or "")
    module_name, func_name = _parse_agent_entrypoint(tool, entrypoint)
    context = AgentContext(channel, cfg, goal)
    tool._set_path(pack)
    module = importlib.import_module(module_name)
    func = getattr(module, func_name, None)
    if func is None:
        raise ImportError("Function '%s' not found in module '%s'" % (func_name, module_name))
    return tool._call(lambda **kw: func(context, **kw), inp)


class _FirstLine:
    """The tool request: the first line of the host's stream (the shim
    reads replies after it from the same reader)."""

    def __init__(self, reader):
        self._reader = reader

    def read(self, n):
        return self._reader.readline(n)


def main():
    tool = _load_tool_shim()
    sys.dont_write_bytecode = True
    pid = os.getpid()
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            stream.flush()
    # The protocol's descriptors, kept from the agent's way (not inherited
    # by child processes): what it prints goes to stderr, what it reads
    # from stdin is nothing.
    out = os.dup(1)
    inp = os.dup(0)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdout = sys.stderr
    sys.stdin = open(os.devnull, "r")
    reader = os.fdopen(inp, "rb")
    channel = _Channel(reader, out, tool._encode)
    body, err = None, None
    try:
        body = tool._result_body(_run(tool, sys.argv, reader, channel))
    except BaseException as exc:  # the agent's failure, whatever it raised
        err = exc
    if os.getpid() != pid:
        os._exit(0)
    if body is None:
        body = tool._encode({"ok": False, "error": tool._describe(err)})
    # The tool shim's response object, as the agent protocol's result line.
    body = RESULT_HEAD + body[1:]
    if len(body) > MAX_RESULT:
        body = RESULT_HEAD + tool._encode({"ok": False, "error": "ValueError: the result is %d bytes, more than %d" % (
            len(body), MAX_RESULT)})[1:]
    for stream in (sys.stdout, sys.stderr, sys.__stdout__):
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    try:
        channel.write(body)
    except OSError:
        pass  # the host stopped reading: the run is over
    os._exit(0)


if __name__ == "__main__":
    main()
