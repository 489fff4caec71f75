"""Writing the research cold start's demonstrations: entity names found by a prefix-tree regex vs one alternation.

    python benchmarks/bench_demo_names.py [--repeats 3]

Every ``python -m verl_parl.main`` of the research task writes the cold start's 3,000 demonstrations once, because
their text names the cached checkpoint's folder (``ColdStartSpec.digest``). Four in five get fresh entity names
(``with_fresh_names``), which finds every country and city name of the suite's world (about 1,300) in each string.
Two ways to write the pattern, side by side in one run, on the default recipe:

* ``alternation``: the names sorted longest first, joined by ``|`` (what the pattern was);
* ``prefix tree``: :func:`verl_parl_demo.tasks.research.names.trie_pattern` (what it is), which matches the same.

Prints seconds for the whole demonstration set (median of ``--repeats``), the ratio, and whether both wrote the
same demonstrations (the digest). Progress on stderr, the table on stdout.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time

from verl_parl_demo.modelbuild.coldstart import default_spec
from verl_parl_demo.tasks.research import demos, names


def alternation_pattern(seed: int) -> tuple[re.Pattern[str], tuple[str, ...]]:
    """The plain alternation over the same names as ``names._name_pattern``."""
    _, train = names._name_pattern(seed)
    alternatives = "|".join(re.escape(n) for n in sorted(names.world_names(seed), key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternatives})(?!\w)"), train


def timed(repeats: int, label: str) -> tuple[float, str]:
    spec = default_spec("research")
    seconds, digest = [], ""
    for repeat in range(repeats):
        start = time.perf_counter()
        written = spec.demos()
        seconds.append(time.perf_counter() - start)
        digest = spec.digest(written)
        print(f"{label}: run {repeat + 1}/{repeats} {seconds[-1]:.2f} s", file=sys.stderr, flush=True)
    return statistics.median(seconds), digest


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    demos.demo_world(0)  # the index is built once, outside the timings
    trie_pattern = names._name_pattern
    trie_pattern(0)
    plain = {0: alternation_pattern(0)}
    tree_s, tree_digest = timed(args.repeats, "prefix tree")
    names._name_pattern = lambda seed: plain[seed]  # type: ignore[assignment]
    try:
        plain_s, plain_digest = timed(args.repeats, "alternation")
    finally:
        names._name_pattern = trie_pattern
    print(f"{'names found by':<16}{'seconds':>10}{'speed-up':>10}")
    print(f"{'alternation':<16}{plain_s:>10.2f}{1.0:>9.2f}x")
    print(f"{'prefix tree':<16}{tree_s:>10.2f}{plain_s / tree_s:>9.2f}x")
    print(f"same demonstrations: {tree_digest == plain_digest} (digest {tree_digest})")


if __name__ == "__main__":
    main()
