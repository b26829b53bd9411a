"""Session stores for agent frameworks, on sessiontree sessions (docs/integrations.md).

Each module needs its framework (``pip install 'sessiontree[openai-agents]'``, ``'sessiontree[pydantic-ai]'``,
``'sessiontree[adk]'`` or ``'sessiontree[claude-agent]'``); importing ``sessiontree`` never does. ``claude_code_entries``
(the Claude Code transcript mapping, used by ``sessiontree import --format claude-code``) needs nothing.
"""

from __future__ import annotations

# (the framework's top-level package, the extra that installs it) for each integration module
_EXTRAS = {"openai_agents": ("agents", "openai-agents"), "pydantic_ai": ("pydantic_ai", "pydantic-ai")}


class MissingExtra(ImportError):
    """An integration imported without its framework installed: ``code`` is ``missing_extra`` (as `sessiontree serve`
    says without the web extra), and the message gives the pip command."""

    code = "missing_extra"


def missing_extra(exc: ModuleNotFoundError, module: str) -> ImportError:
    """The error to raise for ``exc`` in the integration ``module``: :class:`MissingExtra` when the missing module is
    the framework (or part of it, pydantic's included), else ``exc`` itself (a real bug, not a missing extra)."""
    framework, extra = _EXTRAS[module.rpartition(".")[2]]
    missing = (exc.name or "").partition(".")[0]
    if missing not in (framework, "pydantic", "pydantic_core", "openai"):
        return exc
    return MissingExtra(f"{module} needs the {extra} extra ({missing} is not installed): pip install 'sessiontree[{extra}]'",
                        name=exc.name)


__all__ = ["MissingExtra"]
