"""Session stores for agent frameworks, on sessiontree sessions (docs/integrations.md).

Each module needs its framework (``pip install 'sessiontree[openai-agents]'`` or ``'sessiontree[pydantic-ai]'``);
importing ``sessiontree`` never does.
"""
