"""A Hydra search-path plugin (Hydra finds it in the ``hydra_plugins`` namespace): when Hydra composes verl-parl's
config (``verl_parl.configs`` is the primary config), every registered task's ``TaskSpec.config_dir`` joins the
search path, so that ``embedded=<task>`` selects a plugin's task in ``python -m verl_parl.main`` and in any
in-process compose alike. Other Hydra apps are left as they are."""

from __future__ import annotations

from hydra.core.config_search_path import ConfigSearchPath
from hydra.plugins.search_path_plugin import SearchPathPlugin

PRIMARY = "pkg://verl_parl.configs"


class TaskConfigSearchPath(SearchPathPlugin):
    """Appends the registered tasks' config folders to verl-parl's search path."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        if not any(element.path == PRIMARY for element in search_path.get_path()):
            return
        from verl_parl.cli.selection import task_config_dirs

        present = {element.path for element in search_path.get_path()}
        for path in task_config_dirs():
            if path not in present:
                search_path.append(provider="verl-parl task", path=path)
