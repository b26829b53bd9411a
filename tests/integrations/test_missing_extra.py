"""Importing an integration without its framework installed says so, with the pip command (issue 37)."""

from __future__ import annotations

import subprocess
import sys

import pytest

PROBE = """
import sys
for name in {hidden!r}:
    sys.modules[name] = None  # as if the framework were not installed: its import fails
import sessiontree
try:
    import {module}
except ImportError as exc:
    print(type(exc).__name__, getattr(exc, "code", None), exc, sep="|")
else:
    print("imported")
"""


@pytest.mark.parametrize(("module", "hidden", "extra"), [
    ("sessiontree.integrations.openai_agents", ["agents"], "openai-agents"),
    ("sessiontree.integrations.pydantic_ai", ["pydantic_ai"], "pydantic-ai"),
])
def test_an_integration_without_its_extra_raises_missing_extra_with_the_pip_command(module, hidden, extra):
    """The import fails with ``MissingExtra`` (an ``ImportError``), code ``missing_extra``, naming the extra to install."""
    out = subprocess.run([sys.executable, "-c", PROBE.format(module=module, hidden=hidden)], capture_output=True,
                         text=True, timeout=60, check=True).stdout.strip()
    kind, code, message = out.split("|")
    assert (kind, code) == ("MissingExtra", "missing_extra")
    assert message == f"{module} needs the {extra} extra ({hidden[0]} is not installed): pip install 'sessiontree[{extra}]'"


def test_with_the_framework_installed_the_integration_imports():
    """The same probe, hiding nothing, imports the integration (the test above is not passing by accident)."""
    for module in ("sessiontree.integrations.openai_agents", "sessiontree.integrations.pydantic_ai"):
        out = subprocess.run([sys.executable, "-c", PROBE.format(module=module, hidden=[])], capture_output=True,
                             text=True, timeout=60, check=True).stdout.strip()
        assert out == "imported"
