"""An example third-party verl-parl plugin (see ``plugin.py`` and the distribution's README)."""
