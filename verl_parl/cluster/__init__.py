"""A run on a Ray cluster of several nodes: what its workers read and where (``parl.cluster``), checked on every
node before training starts. The driver's side of joining a cluster is :mod:`verl_parl.cli.cluster`."""
