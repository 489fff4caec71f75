"""The demo's tasks: the arithmetic task, the offline wide/deep research suite, the widechain family, and the
synthetic fanout and fanpages tasks (the default), each registered by its ``plugin`` module."""
