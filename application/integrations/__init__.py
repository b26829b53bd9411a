"""Session stores for agent frameworks, on sessiontree sessions (docs/integrations.md).

Each module needs its framework (``pip install 'sessiontree[openai-agents]'``, ``'sessiontree[pydantic-ai]'``,
``'sessiontree[adk]'`` or ``'sessiontree[claude-agent]'``); importing ``sessiontree`` never does. ``claude_code_entries``
(the Claude Code transcript mapping, used by ``sessiontree import --format claude-code``) needs nothing.
"""
