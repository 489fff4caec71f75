"""The docs' code blocks and command lines, as the doc tests read them (``tests/unit/test_docs.py`` runs them all;
the checks are in ``tests/docs_checks.py``, the samples and stubs in ``tests/docs_samples.py``).

The docs are ``README.md``, ``docs/*.md`` (not ``docs/experiments/``: dated histories) and
``examples/**/README.md``. In them:

* every ```` ```python ```` (or ```` ```py ````) block is run in a fresh module, in a folder of its own; a block
  that defines ``@hookimpl`` functions is then loaded as a plugin (beside the built-in ones) and its registration
  hooks are called, so that a spec it registers is built for real; a context policy it registers must pass
  ``check_context_policy``; ``test_*`` functions it defines are called, as pytest would;
* every ``python -m verl_parl.main ...`` command line (in ```` ```bash ````/```` ```console ````/plain blocks, and
  inline in the text) is composed and validated with ``verl_parl.cli.dryrun.dry_run``;
* every other ``python -m <our module> ...`` and ``python scripts/...py`` / ``python benchmarks/...py`` command line
  is run up to its argument parser, which must accept it (inline mentions: its flags must be the parser's);
  ``python -m pytest`` lines must name test files that exist and markers that are registered, ``bash`` lines a
  script that exists, ``pip install -e`` lines a folder that exists.

**Reading a command line.** Continuation lines (``\\``) are joined and shell comments dropped; a console block's
commands are its ``$ `` lines. Commands joined by ``&&``, ``;`` or ``|`` are read one by one; ``NAME=value`` words
before a command are its environment. Placeholders follow these rules:

* ``...`` (more of the same) is dropped; a bracketed optional part is kept when it starts with a flag or an
  override (``[--index]``, ``[--val 20 --seed 0]``) and dropped when it is prose (``[more overrides]``);
* an upper-case placeholder (``CKPT``, ``RUN_DIR``) is a string to a parser; given to a numeric option (``--step N``)
  it is read as 1;
* a file a command reads (``data/widesearch/train.parquet``, ``WEB_TOOLS.yaml``) must be named by the block's
  ``files`` marker (below), which makes it in the block's folder from a sample; ``$NAME`` is expanded from the
  block's ``env`` marker.

**Markers.** An HTML comment right above a block or a paragraph (blank lines between are fine), one key each::

    <!-- docs-test: setup: from docs_samples import EchoTool as MyTool -->
    <!-- docs-test: files: data/widesearch=@widesearch-rows WEB_TOOLS.yaml=@web-tools -->
    <!-- docs-test: stubs: web_search -->
    <!-- docs-test: gpus: 8 -->
    <!-- docs-test: env: MODEL=plugins/demo/verl_parl_demo/modelbuild/weights/coldstart-arithmetic -->
    <!-- docs-test: skip: the reason, which is required -->

``setup`` is Python run in the block's module before the block; ``files`` makes ``DEST`` (relative to the block's
folder) from a path of the repository or a sample of :data:`docs_samples.SAMPLES` (``@name``); ``stubs`` installs
stand-ins of :data:`docs_samples.STUBS` for external services (a plugin registering the tool); ``gpus`` checks the
block's ``main`` commands as on a machine with that many GPUs (``profile=gpu``, and ``ray_kwargs.ray_init.num_gpus``);
a ``+recipe=NAME`` of ``examples/gpu`` is always checked on the machine its header expects. ``skip`` exempts the
block (counted by the test; keep them rare). An unknown key is an error.

**The block's folder** mirrors the repository root (a link to every top-level entry git tracks), so
``examples/gpu`` or ``plugins/demo/...`` resolve as they do from a checkout, while files a block makes stay there.
"""

from __future__ import annotations

import dataclasses
import re
import shlex
from pathlib import Path
from typing import Any

from docs_samples import REPO, SAMPLES, STUBS

MARKER = re.compile(r"<!--\s*docs-test:\s*(?P<key>[a-z]+)\s*:\s*(?P<value>.*?)\s*-->", re.S)
MARKER_KEYS = ("setup", "files", "stubs", "gpus", "env", "skip")
PYTHON_LANGS = ("python", "py")
SHELL_LANGS = ("bash", "sh", "shell", "console", "")
OUR_MODULES = re.compile(r"^verl_parl(_[a-z]+)?(\.|$)")
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")
OPERATORS = {"&&", "||", ";", "|", "&"}


def doc_files(repo: Path = REPO) -> list[Path]:
    """The docs checked: README.md, docs/*.md and examples/**/README.md (repository-relative, sorted)."""
    found = [
        repo / "README.md",
        *sorted((repo / "docs").glob("*.md")),
        *sorted((repo / "examples").glob("**/README.md")),
    ]
    return [path.relative_to(repo) for path in found if path.is_file()]


# ---- markers ---------------------------------------------------------------------------------------------------


class MarkerError(ValueError):
    """A ``docs-test`` marker that cannot be read."""


@dataclasses.dataclass(frozen=True)
class Marker:
    """What the ``docs-test`` comments above a block or a paragraph say."""

    setup: str = ""
    files: tuple[tuple[str, str], ...] = ()
    stubs: tuple[str, ...] = ()
    gpus: int | None = None
    env: tuple[tuple[str, str], ...] = ()
    skip: str | None = None

    @classmethod
    def parse(cls, comments: list[str], where: str) -> Marker:
        values: dict[str, Any] = {}
        for comment in comments:
            found = MARKER.fullmatch(comment.strip())
            if found is None:
                raise MarkerError(f"{where}: not a marker (<!-- docs-test: key: value -->): {comment.strip()!r}")
            key, value = found["key"], found["value"]
            if key not in MARKER_KEYS:
                raise MarkerError(f"{where}: unknown marker key {key!r}; known: {', '.join(MARKER_KEYS)}")
            if key in values:
                raise MarkerError(f"{where}: marker key {key!r} given twice")
            values[key] = value
        marker = cls(
            setup=values.get("setup", ""),
            files=_pairs(values.get("files", ""), "files", where),
            stubs=tuple(values.get("stubs", "").split()),
            gpus=int(values["gpus"]) if "gpus" in values else None,
            env=_pairs(values.get("env", ""), "env", where),
            skip=values.get("skip"),
        )
        if marker.skip is not None and not marker.skip.strip():
            raise MarkerError(f"{where}: a skip marker must say why (<!-- docs-test: skip: REASON -->)")
        unknown = [stub for stub in marker.stubs if stub not in STUBS]
        if unknown:
            raise MarkerError(f"{where}: unknown stub(s) {unknown}; known: {sorted(STUBS)}")
        samples = [source for _, source in marker.files if source.startswith("@") and source[1:] not in SAMPLES]
        if samples:
            raise MarkerError(f"{where}: unknown sample(s) {samples}; known: {['@' + name for name in SAMPLES]}")
        return marker


def _pairs(text: str, key: str, where: str) -> tuple[tuple[str, str], ...]:
    pairs = []
    for word in text.split():
        name, sep, value = word.partition("=")
        if not sep or not name or not value:
            raise MarkerError(f"{where}: {key} marker entries are NAME=VALUE, got {word!r}")
        pairs.append((name, value))
    return tuple(pairs)


# ---- markdown --------------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Block:
    """A fenced code block: its file, the line of its opening fence, its language and text."""

    path: str
    line: int
    lang: str
    text: str
    marker: Marker

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclasses.dataclass(frozen=True)
class Span:
    """An inline code span (``` `...` ```) outside the fenced blocks."""

    path: str
    line: int
    text: str
    marker: Marker


FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
SPAN = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def parse_markdown(text: str, path: str) -> tuple[list[Block], list[Span]]:
    """The fenced blocks and the inline code spans of a markdown text, each with the markers above it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    spans: list[Span] = []
    comments: list[str] = []
    paragraph: list[tuple[int, str]] = []
    paragraph_marker = Marker()

    def end_paragraph() -> None:
        nonlocal paragraph, paragraph_marker
        if paragraph:
            spans.extend(_spans(paragraph, path, paragraph_marker))
        paragraph, paragraph_marker = [], Marker()

    i = 0
    while i < len(lines):
        line = lines[i]
        fence = FENCE.match(line)
        if fence:
            end_paragraph()
            indent, mark = len(fence["indent"]), fence["fence"]
            lang = fence["info"].strip().split(" ")[0].lower() if fence["info"].strip() else ""
            body, j = [], i + 1
            while j < len(lines) and not re.match(rf"^\s*{re.escape(mark[0])}{{{len(mark)},}}\s*$", lines[j]):
                body.append(lines[j][indent:] if lines[j][:indent].strip() == "" else lines[j].lstrip())
                j += 1
            marker = Marker.parse(comments, f"{path}:{i + 1}")
            blocks.append(Block(path, i + 1, lang, "\n".join(body) + "\n", marker))
            comments = []
            i = j + 1
            continue
        stripped = line.strip()
        if stripped.startswith("<!--") and "docs-test" in stripped:
            end_paragraph()
            comment, j = line, i
            while "-->" not in comment and j + 1 < len(lines):
                j += 1
                comment += "\n" + lines[j]
            comments.append(comment)
            i = j + 1
            continue
        if not stripped:
            end_paragraph()
        else:
            if not paragraph:
                paragraph_marker = Marker.parse(comments, f"{path}:{i + 1}")
                comments = []
            paragraph.append((i + 1, line))
        i += 1
    end_paragraph()
    return blocks, spans


def _spans(paragraph: list[tuple[int, str]], path: str, marker: Marker) -> list[Span]:
    text = "\n".join(line for _, line in paragraph)
    starts = [0]
    for _, line in paragraph:
        starts.append(starts[-1] + len(line) + 1)
    found = []
    for match in SPAN.finditer(text):
        row = max(k for k, start in enumerate(starts) if start <= match.start())
        content = match.group(2).replace("\n", " ").replace("\\|", "|").strip()
        found.append(Span(path, paragraph[min(row, len(paragraph) - 1)][0], content, marker))
    return found


# ---- command lines ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Command:
    """One command of a doc: where it is, its words (placeholders applied), its environment and its marker.

    ``inline``: found in the text (a mention), not in a block (a command line to run as written)."""

    path: str
    line: int
    argv: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    marker: Marker
    inline: bool

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"

    @property
    def kind(self) -> str:
        """``main``, ``module`` (another ``python -m`` of ours), ``script``, ``pytest``, ``bash``, ``pip`` or
        ``other`` (not checked: an external tool)."""
        words = self.argv
        if words[:1] in (("python",), ("python3",)):
            return _python_kind(words[1:])
        if words[:1] == ("bash",) and len(words) > 1:
            return "bash"
        return "pip" if words[:3] == ("pip", "install", "-e") else "other"

    def describe(self) -> str:
        env = " ".join(f"{k}={v}" for k, v in self.env)
        return f"{self.where}: {env + ' ' if env else ''}{shlex.join(self.argv)}"


def block_commands(block: Block) -> list[Command]:
    """The commands of a shell (or plain) block, one per command of each logical line."""
    if block.lang not in SHELL_LANGS:
        return []
    commands = []
    lines = block.text.splitlines()
    i = 0
    while i < len(lines):
        start, logical = i + 1, lines[i]
        while logical.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            logical = logical.rstrip()[:-1] + " " + lines[i].strip()
        i += 1
        text = logical.strip()
        if block.lang == "console":
            if not text.startswith("$ "):
                continue
            text = text[2:]
        elif block.lang == "" and not re.match(r"^(\$ )?([A-Z_][A-Z0-9_]*=\S+ )*(python3?|bash|pip) ", text):
            continue  # a plain block: output, errors and usage lines; only command-like lines are commands
        text = text.removeprefix("$ ")
        for words in _split_commands(text):
            commands.append(_command(words, block.path, block.line + start, block.marker, inline=False))
    return commands


def span_commands(span: Span) -> list[Command]:
    """The command of an inline span that holds one (``python -m ...``, ``python scripts/x.py``), from ``python``."""
    found = re.search(r"(^|\s)((?:[A-Z_][A-Z0-9_]*=\S+ )*python3? (?:-m \S+|\S+\.py)\b.*)$", span.text)
    if found is None:
        return []
    try:  # a mention, often in usage syntax (``--alias A|B``, ``(--data X | --tasks Y)``): words, no operators
        words = shlex.split(found.group(2).split(" && ")[0])
    except ValueError:
        return []
    return [_command(words, span.path, span.line, span.marker, inline=True)]


REDIRECTION = re.compile(r"(?<!\S)\d?(?:>>?|<)(?:&\d|\s*[^\s|;&]+)")


def _split_commands(text: str) -> list[list[str]]:
    """The words of each command of a shell line (redirections and comments dropped)."""
    lexer = shlex.shlex(REDIRECTION.sub(" ", text), posix=True, punctuation_chars="&|;")
    lexer.whitespace_split = True
    lexer.commenters = "#"
    words: list[str] = []
    commands = []
    for token in lexer:
        if token in OPERATORS:
            commands.append(words)
            words = []
        else:
            words.append(token)
    commands.append(words)
    return [w for w in commands if w]


def _command(words: list[str], path: str, line: int, marker: Marker, *, inline: bool) -> Command:
    env = []
    while words and re.match(r"^[A-Z_][A-Z0-9_]*=", words[0]):
        name, _, value = words.pop(0).partition("=")
        env.append((name, value))
    return Command(path, line, tuple(_placeholders(words)), (*env, *marker.env), marker, inline)


def _python_kind(args: tuple[str, ...]) -> str:
    """The kind of a ``python ARGS`` command (:attr:`Command.kind`)."""
    if args[:2] == ("-m", "verl_parl.main"):
        return "main"
    if args[:1] == ("-m",) and len(args) > 1:
        if args[1] == "pytest":
            return "pytest"
        ours = OUR_MODULES.match(args[1]) and re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", args[1])
        return "module" if ours else "other"  # not ours, or a pattern (``python -m verl_parl.<name>``)
    return "script" if args and args[0].endswith(".py") and "/" in args[0] else "other"


def _placeholders(words: list[str]) -> list[str]:
    """``...`` dropped; optional ``[...]`` parts kept when they hold flags or overrides, else dropped."""
    kept: list[str] = []
    group: list[str] | None = None
    for original in words:
        word = original
        if word in ("...", "…"):
            continue
        if group is None and word.startswith("[") and not word.startswith("[]"):
            group, word = [], word[1:]
        if group is not None:
            closing = word.endswith("]") and word.count("[") < word.count("]")
            word = word[:-1] if closing else word
            if word and word not in ("...", "…"):
                group.append(word)
            if closing:
                if group and (group[0].startswith("-") or "=" in group[0]):
                    kept.extend(group)
                group = None
            continue
        kept.append(word)
    if group:  # an unclosed bracket: not an optional part after all
        kept.extend(group)
    return kept
