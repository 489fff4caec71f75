"""The public namespace for writing a verl-parl plugin: :data:`hookimpl` and :data:`NAME`.

A plugin is any module (or object) with functions named after the hooks in
``verl_parl.hookspecs`` and marked with :data:`hookimpl`. A minimal tool plugin::

    # my_pkg/my_plugin.py
    from __future__ import annotations

    from verl_parl.plugin import hookimpl
    from verl_parl.registry import ToolSpec


    def make_echo_tool(**kwargs):
        from my_pkg.echo import EchoTool  # import heavy dependencies here, not at module level

        return EchoTool(**kwargs)


    @hookimpl
    def verl_parl_register_tools(register):
        register(ToolSpec(name="echo", factory=make_echo_tool, description="Echo the input back"))


    @hookimpl
    def verl_parl_validate_config(config):
        return []  # or ["parl.tools.echo.x: what is wrong"], one message per problem

Make it discoverable by declaring an entry point in the ``verl_parl`` group of your distribution's
``pyproject.toml``; the entry-point name becomes the plugin's name::

    [project.entry-points.verl_parl]
    myplugin = "my_pkg.my_plugin"

After ``pip install``, check that it is found and what it registered with::

    python -m verl_parl.plugins list

Rules the host enforces when it loads plugins:

* each tool, reward, scorer and context-policy name is unique across all plugins;
* a ``@hookimpl`` whose name or arguments match no hook is an error, not silently ignored;
* a plugin that fails to import stops the run with an error naming its entry point.

Set ``VERL_PARL_BLOCK_PLUGINS=myplugin,other`` to skip plugins by name and ``VERL_PARL_TRACE_HOOKS=1``
to trace every hook call to stderr. ``docs/plugins.md`` documents every hook.
"""

from __future__ import annotations

import pluggy

__all__ = ["NAME", "hookimpl"]

NAME = "verl_parl"
"""The pluggy project name and the entry-point group plugins are declared in."""

hookimpl = pluggy.HookimplMarker(NAME)
"""Decorator marking a function as the implementation of the ``verl_parl_*`` hook of that name."""
