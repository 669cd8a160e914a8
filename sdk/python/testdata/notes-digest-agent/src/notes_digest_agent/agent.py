"""notes_digest_agent — AgentNode agent

Notes Digest Agent: count a text, extract its keywords, and have the model
write a one-line digest.
"""
from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def _call(ctx, slug, tool_name=None, **kw):
    """Call a tool via AgentContext. Returns (success: bool, data: dict)."""
    r = ctx.run_tool(slug, tool_name, **kw)
    if r.success:
        return True, (r.result if isinstance(r.result, dict) else {"output": r.result})
    return False, {"error": r.error or "unknown", "mode": r.mode_used}


def run(context: Any, **kwargs: Any) -> dict:
    """Agent entrypoint — AgentContext contract v1.

    Args:
        context: AgentContext with goal and LLM/tool access.
        **kwargs: Additional parameters from the caller.

    Returns:
        Structured result dict.
    """
    text = kwargs.get("text", "") or context.goal
    print(f"digesting {len(text)} characters for: {context.goal}")

    # Step 1: measure the text (the package's only tool, by package).
    context.next_iteration()
    ok, stats = _call(context, "e2e-word-count", None, text=text)
    if not ok:
        stats = {"error": stats["error"]}

    # Step 2: keywords (a named tool).
    context.next_iteration()
    ok, kw = _call(context, "e2e-keywords", "keywords", text=text, top=2)
    keywords = kw.get("keywords", []) if ok else []

    # Step 3: the digest from the model.
    context.next_iteration()
    digest = context.call_llm_text([
        {"role": "user", "content": f"Digest in one line: {text}\nKeywords: {', '.join(map(str, keywords))}"},
    ])

    logger.info("digest done after %d tool calls", context.tool_calls_made)
    return {
        "digest": digest,
        "stats": stats,
        "keywords": keywords,
        "tool_calls": context.tool_calls_made,
        "llm_calls": context.llm_calls_made,
        "iterations": context.iteration,
        "done": True,
    }
