"""The pretraining curriculum's samples (:mod:`verl_parl_demo.modelbuild.pretrain`): induction copies, made-up
fact lookups, and the research suite's pages listed as search hits, read by questions or by a
subagent's table rows. Each sample is token ids plus a loss mask over what is copied or answered;
held-out entities never appear (:func:`heldout_questions` draws only them, for the gate).
"""

from __future__ import annotations

import dataclasses
import functools
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from transformers import PreTrainedTokenizerBase

from verl_parl.rewards.table import markdown_rule
from verl_parl_demo.tasks.research import corpus

__all__ = [
    "LIST_CUES",
    "WALK_SCORES",
    "PageWorld",
    "Sample",
    "heldout_hops",
    "heldout_questions",
    "heldout_rows",
    "hop_sample",
    "induction_sample",
    "list_sample",
    "lookup_sample",
    "page_cells",
    "page_facts",
    "page_sample",
    "page_world",
    "qa_sample",
    "row_gate_sample",
    "walk_sample",
]


@dataclass(frozen=True)
class Sample:
    """One training sequence: ``loss_mask[i]`` is 1 where ``input_ids[i]`` is predicted and scored."""

    source: str
    input_ids: list[int]
    loss_mask: list[int]


def induction_sample(rng: random.Random, token_ids: Sequence[int], length: int, span: int) -> Sample:
    """``length`` random tokens in which ``span`` of them reappear at a random later offset.

    The loss is on the copy's tokens after its first (a model that copies predicts each of them)."""
    ids = [rng.choice(token_ids) for _ in range(length)]
    source = rng.randrange(0, length - 3 * span + 1)
    target = rng.randrange(source + 2 * span, length - span + 1)
    ids[target : target + span] = ids[source : source + span]
    mask = [0] * length
    mask[target + 1 : target + span] = [1] * (span - 1)
    return Sample("induction", ids, mask)


_SYLLABLES = tuple(c + v for c in "bdfgklmnprstvz" for v in "aeiou")
_FACT_KEYS = ("code", "capital", "population", "area", "currency", "colour", "river", "number")


def _name(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()


def _value(rng: random.Random, key: str) -> str:
    if key in ("population", "area", "number"):
        return str(rng.randint(10, 10 ** rng.randint(3, 8)))
    if key == "code":
        return "".join(rng.choice("ABCDEFGHIKLMNOPRSTUVZ") for _ in range(3))
    return _name(rng)


def qa_sample(source: str, tokenizer: PreTrainedTokenizerBase, context: str, qa: list[tuple[str, str]]) -> Sample:
    """``context``, then ``Question: q`` / ``Answer: a`` lines; the loss is on each answer and its newline."""
    ids = list(_encode(tokenizer, context + "\n"))
    mask = [0] * len(ids)
    for question, answer in qa:
        prompt = _encode(tokenizer, f"Question: {question}\nAnswer:")
        reply = _encode(tokenizer, f" {answer}\n")
        ids += prompt + reply
        mask += [0] * len(prompt) + [1] * len(reply)
    return Sample(source, ids, mask)


def lookup_sample(rng: random.Random, tokenizer: PreTrainedTokenizerBase, n_facts: int, n_questions: int) -> Sample:
    """Made-up facts about made-up names, then questions about some of them (keys repeat across names)."""
    facts = []
    for _ in range(n_facts):
        name, key = _name(rng), rng.choice(_FACT_KEYS)
        facts.append((name, key, _value(rng, key)))
    context = " ".join(f"The {key} of {name} is {value}." for name, key, value in facts)
    asked = rng.sample(facts, min(n_questions, len(facts)))
    return qa_sample("lookup", tokenizer, context, [(f"What is the {key} of {name}?", v) for name, key, v in asked])


@functools.lru_cache(maxsize=4096)
def _encode(tokenizer: PreTrainedTokenizerBase, text: str) -> list[int]:
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


# ---------------------------------------------------------------------------------------------- pages


@dataclass(frozen=True)
class PageWorld:
    """The research suite's world, split like the suite splits it: training and held-out entities."""

    world: Any
    train: Any  # tasks.Pool of the training countries and their cities
    heldout: Any  # tasks.Pool of the validation and test countries and their cities


@functools.lru_cache(maxsize=2)
def page_world(seed: int = 0) -> PageWorld:
    from verl_parl_demo.tasks.research import dataset, source
    from verl_parl_demo.tasks.research.tasks import Pool

    config = dataset.SuiteConfig(seed=seed)
    world = source.load_world(config.cities_per_country)
    pools = dataset.partition_countries(world, seed, config.entity_fractions, region_size=config.region_size)
    return PageWorld(world, Pool.of(world, pools["train"]), Pool.of(world, (*pools["val"], *pools["test"])))


def _redrawn(world: Any, entity: Any, rng: random.Random) -> Any:
    """``entity`` with its facts redrawn (numbers, and names taken from other entities)."""
    countries = list(world.countries.values())
    if hasattr(entity, "iso"):
        return dataclasses.replace(
            entity,
            capital=rng.choice(countries).capital or entity.capital,
            population=rng.randint(1_000, 300_000_000),
            area_km2=rng.randint(10, 10_000_000),
            currency_code=rng.choice(countries).currency_code or entity.currency_code,
            continent=rng.choice(countries).continent,
            phone=str(rng.randint(1, 999)),
        )
    cities = list(world.cities.values())
    return dataclasses.replace(
        entity,
        population=rng.randint(1_000, 20_000_000),
        latitude=rng.uniform(-60, 70),
        longitude=rng.uniform(-180, 180),
        timezone=rng.choice(cities).timezone,
    )


def page_facts(world: Any, entity: Any, page_text: str) -> list[tuple[str, str]]:
    """``(question, answer)`` for every attribute of ``entity`` whose value the page writes (as written)."""
    from verl_parl_demo.tasks.research.tasks import CITY_ATTRIBUTES, COUNTRY_ATTRIBUTES

    attributes = COUNTRY_ATTRIBUTES if hasattr(entity, "iso") else CITY_ATTRIBUTES
    qa = []
    for attribute in attributes:
        value = attribute.value(world, entity)
        if value is None:
            continue
        value = corpus.as_written(value, page_text)
        if value in page_text:
            qa.append((f"What is {attribute.phrase} of {entity.name}?", value))
    return qa


def page_cells(world: Any, entity: Any, page_text: str) -> list[tuple[Any, str]]:
    """``(attribute, value as written)`` for every attribute of ``entity`` whose value the page writes."""
    from verl_parl_demo.tasks.research.tasks import CITY_ATTRIBUTES, COUNTRY_ATTRIBUTES

    cells = []
    for attribute in COUNTRY_ATTRIBUTES if hasattr(entity, "iso") else CITY_ATTRIBUTES:
        value = attribute.value(world, entity)
        if value is not None and (value := corpus.as_written(value, page_text)) in page_text:
            cells.append((attribute, value))
    return cells


def _row_task(noun: str, attributes: Sequence[Any]) -> tuple[str, str]:
    """``("A, B and C", "| noun | a | b | c |")``: what a row task asks for, and its header."""
    phrases = [a.phrase for a in attributes]
    wanted = ", ".join(phrases[:-1]) + f" and {phrases[-1]}" if len(phrases) > 1 else phrases[0]
    return wanted, "| " + " | ".join([noun, *(a.column for a in attributes)]) + " |"


def _row_reply(
    rng: random.Random, tokenizer: PreTrainedTokenizerBase, entity: Any, cells: list[Any]
) -> list[tuple[list[int], list[int]]]:
    """A subagent's row task in plain text: ``Find A and B of X. Reply with one table row: | noun | a | b |``
    then the row ``| X | va | vb |`` (the loss on the row): which value comes next is given only by the
    header's column order."""
    chosen = rng.sample(cells, min(len(cells), rng.randint(1, 3)))
    wanted, header = _row_task("country" if hasattr(entity, "iso") else "city", [a for a, _ in chosen])
    prompt = _encode(tokenizer, f"Find {wanted} of {entity.name}. Reply with one table row: {header}\n")
    reply = _encode(tokenizer, "| " + " | ".join([entity.name, *(v for _, v in chosen)]) + " |\n")
    return [(prompt, [0] * len(prompt)), (reply, [1] * len(reply))]


def _page(world: Any, entity: Any, seed: int) -> dict[str, str]:
    make = corpus.country_page if hasattr(entity, "iso") else corpus.city_page
    return make(world, entity, seed)


def page_sample(
    rng: random.Random,
    tokenizer: PreTrainedTokenizerBase,
    pw: PageWorld,
    n_questions: int,
    *,
    max_pages: int = 1,
    row_share: float = 0.0,
    task_first: float = 0.0,
) -> Sample | None:
    """One to ``max_pages`` training entities' pages (their facts redrawn, random phrasings) listed as
    search hits, then questions about facts of any of them: the reader must find the right page by the
    entity's name, then the fact on it, at the context lengths of a subagent's conversation."""
    entities: dict[str, Any] = {}
    for _ in range(rng.randint(1, max_pages)):
        entity = rng.choice(pw.train.countries) if rng.random() < 0.5 else rng.choice(pw.train.cities)
        entities.setdefault(entity.name, _redrawn(pw.world, entity, rng))
    pages = [(e, _page(pw.world, e, rng.randrange(1 << 30))) for e in entities.values()]
    qa = [pair for entity, page in pages for pair in page_facts(pw.world, entity, page["text"])]
    if not qa:
        return None
    hits = "\n".join(corpus.search_hit(i + 1, page, rng.uniform(5, 40)) for i, (_, page) in enumerate(pages))
    if task_first and rng.random() < task_first:  # the task, the hits, its answer: as a subagent meets them
        entity, page = rng.choice(pages)
        cells = page_cells(pw.world, entity, page["text"])
        if cells and rng.random() < row_share:
            (prompt, _), (reply, reply_mask) = _row_reply(rng, tokenizer, entity, cells)
        else:
            question, answer = rng.choice(page_facts(pw.world, entity, page["text"]) or qa)
            prompt, cue = _encode(tokenizer, f"Question: {question}\n"), _encode(tokenizer, "Answer:")
            answer_ids = _encode(tokenizer, f" {answer}\n")
            reply, reply_mask = cue + answer_ids, [0] * len(cue) + [1] * len(answer_ids)
        context = _encode(tokenizer, hits + "\n")
        return Sample("pages", prompt + context + reply, [0] * (len(prompt) + len(context)) + reply_mask)
    if rng.random() < row_share:  # table rows instead of questions (a subagent's reply to a row task)
        ids = _encode(tokenizer, hits + "\n")
        mask = [0] * len(ids)
        for entity, page in rng.sample(pages, min(n_questions, len(pages))):
            cells = page_cells(pw.world, entity, page["text"])
            for part, part_mask in _row_reply(rng, tokenizer, entity, cells) if cells else []:
                ids, mask = ids + part, mask + part_mask
        return Sample("pages", ids, mask) if any(mask) else None
    return qa_sample("pages", tokenizer, hits, rng.sample(qa, min(n_questions, len(qa))))


WALK_SCORES = ("names", "ends")
"""What a list walk's loss can be on: the names its tasks hand out, and where the list ends (a parallel turn's
end, a serial plan's answer table)."""


def walk_sample(
    rng: random.Random,
    tokenizer: PreTrainedTokenizerBase,
    pw: PageWorld,
    max_names: int = 5,
    *,
    score: Sequence[str] = ("names",),
    serial: bool | None = None,
) -> Sample:
    """A wide task's question listing training entities, then one row task per entity in the listed order,
    each written as the orchestrator writes an ``assign_task`` prompt, with a made-up row coming back after
    it (a serial plan) or not (one parallel turn; ``serial`` None draws either, half and half).

    ``score`` says where the loss is: ``names``, the names the tasks hand out (the next name after the one
    handed out last, which a copy of the last task alone gets wrong); ``ends``, where a list ends: in a
    parallel turn each decision to go on (the next task's first token) or to stop (the end of turn after
    the last listed name, where a model that cannot tell the list is done hands out its last name again
    and again); after a serial plan, an answer table that copies the rows brought back, in order, and
    ends after the last (where such a model writes rows again)."""
    from verl_parl_demo.tasks.research.tasks import CITY_ATTRIBUTES, COUNTRY_ATTRIBUTES, table_question

    unknown = set(score) - set(WALK_SCORES)
    if unknown or not score:
        raise ValueError(f"score={tuple(score)} must name some of {WALK_SCORES}")
    country = rng.random() < 0.5
    noun, pool, attributes = (
        ("country", pw.train.countries, COUNTRY_ATTRIBUTES) if country else ("city", pw.train.cities, CITY_ATTRIBUTES)
    )
    names = [e.name for e in rng.sample(pool, rng.randint(2, max_names))]
    chosen = sorted(rng.sample(range(len(attributes)), rng.randint(1, 3)))
    attrs = tuple(attributes[i] for i in chosen)
    wanted, header = _row_task(noun, attrs)
    drawn = rng.random() < 0.5  # drawn either way, so a given ``serial`` leaves the rest of the stream as it was
    serial = drawn if serial is None else serial
    ends = "ends" in score
    name_loss = int("names" in score)
    ids = list(_encode(tokenizer, table_question(noun, names, attrs, rng) + "\n"))  # the cached list stays intact
    mask = [0] * len(ids)
    rows = []
    for i, name in enumerate(names):
        before, named = _encode(tokenizer, f"Find {wanted} of"), _encode(tokenizer, f" {name}")
        after = f". Reply with one table row: {header}\n"
        if serial:
            rows.append("| " + " | ".join([name, *(_value(rng, rng.choice(_FACT_KEYS)) for _ in attrs)]) + " |\n")
            after += rows[-1]
        tail = _encode(tokenizer, after)
        ids += before + named + tail
        go_on = int(ends and not serial and i > 0)  # the first task follows the question, not a decision
        mask += [go_on] + [0] * (len(before) - 1) + [name_loss] * len(named) + [0] * len(tail)
    if ends and serial:  # the answer: the rows the tasks brought back, in order, and nothing after them
        head = _encode(tokenizer, f"Answer:\n{header}\n{markdown_rule(len(attrs) + 1)}\n")
        ids, mask = ids + head, mask + [0] * len(head)
        for row in rows:
            copied = _encode(tokenizer, row)
            ids, mask = ids + copied, mask + [1] * len(copied)
    if ends:
        ids.append(tokenizer.convert_tokens_to_ids(tokenizer.eos_token))
        mask.append(1)
    return Sample("walk", ids, mask)


LIST_CUES = (("Items:", "\n"), ('"items": "', '"}'))
"""Where a list copy starts and how it ends: a plain line, and ``assign_each``'s items as its call writes them."""


def list_sample(rng: random.Random, tokenizer: PreTrainedTokenizerBase, pool: Any, max_names: int = 6) -> Sample:
    """A wide task's question listing ``pool``'s entities (a third of the names made up), then its list copied
    whole after a cue (:data:`LIST_CUES`), from the space before the first name to the cue's end; the loss is
    on the whole copy. The separators repeat, so after a ``;`` the next name follows only from the name before
    it: a copy that matches one token back writes the name it just wrote again, and this needs two."""
    from verl_parl_demo.tasks.research.tasks import CITY_ATTRIBUTES, COUNTRY_ATTRIBUTES, table_question

    country = rng.random() < 0.5
    noun, entities, attributes = (
        ("country", pool.countries, COUNTRY_ATTRIBUTES) if country else ("city", pool.cities, CITY_ATTRIBUTES)
    )
    count = rng.randint(2, max_names)
    names = [e.name if rng.random() < 2 / 3 else _name(rng) for e in rng.sample(entities, count)]
    attrs = tuple(attributes[i] for i in sorted(rng.sample(range(len(attributes)), rng.randint(2, 3))))
    cue, end = rng.choice(LIST_CUES)
    prompt = _encode(tokenizer, table_question(noun, names, attrs, rng) + "\n" + cue)
    copy = _encode(tokenizer, " " + "; ".join(names) + end)
    return Sample("list", prompt + copy, [0] * len(prompt) + [1] * len(copy))


def _hop_cell(rng: random.Random, pool: Any, column: str) -> str:
    """A made-up value for ``column``: a name of ``pool`` (or a made-up one) where the next hop looks it up."""
    if column == "population":
        return f"{rng.randint(1_000, 30_000_000):,}" if rng.random() < 0.5 else str(rng.randint(1_000, 30_000_000))
    if column == "currency code":
        return "".join(rng.choice("ABCDEFGHIKLMNOPRSTUVZ") for _ in range(3))
    if rng.random() < 0.3:
        return _name(rng)
    return rng.choice(pool.countries if column == "country" else pool.cities).name


def hop_sample(rng: random.Random, tokenizer: PreTrainedTokenizerBase, pool: Any, world: Any) -> Sample:
    """A chain question of the suite over ``pool``'s entities followed one page at a time, as the orchestrator
    follows it (``DEEP_HOPS`` in :mod:`verl_parl_demo.tasks.research.demos`): each hop a row task naming the entity
    the previous row returned, its row coming back below its header, and the last row's cell as the answer.
    The cells are made up (other entities' names, made-up names and numbers), so they can only be copied. The
    loss is on what is copied out of a row: each task's name after the first, and the answer. (A first form
    also quoted each row once more, the loss on the quote: it taught the cold start to repeat rows, and its
    wide tasks ran into loops.)"""
    from verl_parl_demo.tasks.research import tasks as tasks_mod

    type_name, hops = rng.choice(tuple(tasks_mod.CHAINS.items()))
    sampler = getattr(tasks_mod, type_name)(world, pool)
    assert sampler is not None, f"no {type_name} task over this pool"
    task = sampler(rng)
    name = world.entity(task.gold_docids[0]).name
    ids = list(_encode(tokenizer, task.question + "\n"))
    mask = [0] * len(ids)
    for index, (kind, column) in enumerate(hops):
        cell = _hop_cell(rng, pool, column)
        wanted, header = _row_task(kind, [tasks_mod.ATTRIBUTES[kind][column]])
        before, named = _encode(tokenizer, f"Find {wanted} of"), _encode(tokenizer, f" {name}")
        after = _encode(tokenizer, f". Reply with one table row: {header}\n{header}\n")
        row = _encode(tokenizer, f"| {name} | {cell} |\n")
        ids += before + named + after + row
        mask += [0] * len(before) + [int(index > 0)] * len(named) + [0] * (len(after) + len(row))
        name = cell
    cue, answer = _encode(tokenizer, "Answer:"), _encode(tokenizer, f" {name}\n")
    ids += cue + answer
    mask += [0] * len(cue) + [1] * len(answer)
    return Sample("hops", ids, mask)


def heldout_hops(pw: PageWorld, tokenizer: PreTrainedTokenizerBase, seed: int, limit: int) -> list[Sample]:
    """:func:`hop_sample` over held-out entities (their questions, and names of theirs in the cells)."""
    rng = random.Random(f"{seed}/heldout-hops")
    return [hop_sample(rng, tokenizer, pw.heldout, pw.world) for _ in range(limit)]


def _among_hits(
    rng: random.Random, page: dict[str, str], pool: Sequence[Any], *, world: Any, seed: int, max_pages: int
) -> str:
    """``page`` listed as a search hit at a random rank among up to ``max_pages - 1`` other pages of ``pool``."""
    others = [_page(world, e, seed) for e in rng.sample(pool, rng.randint(0, max_pages - 1))]
    listed = [p for p in others if p["title"] != page["title"]]
    listed.insert(rng.randint(0, len(listed)), page)
    return "\n".join(corpus.search_hit(i + 1, p, rng.uniform(5, 40)) for i, p in enumerate(listed))


def row_gate_sample(tokenizer: PreTrainedTokenizerBase, context: str, entity: Any, cells: list[Any]) -> Sample:
    """``context`` (search hits), a row task for ``cells`` and its row, the loss on the asked values only
    (not the entity's name; the tokens as the whole row tokenizes): with :func:`~verl_parl_demo.modelbuild.pretrain`'s
    span accuracy, the share of values a teacher-forced reader writes right."""
    wanted, header = _row_task("country" if hasattr(entity, "iso") else "city", [a for a, _ in cells])
    prompt = _encode(tokenizer, f"{context}\nFind {wanted} of {entity.name}. Reply with one table row: {header}\n")
    values = [entity.name, *(v for _, v in cells)]
    row = "| " + " | ".join(values) + " |\n"
    spans, at = [], row.index(entity.name) + len(entity.name)
    for value in values[1:]:
        start = row.index(value, at)
        spans.append((start, start + len(value)))
        at = start + len(value)
    encoded = tokenizer(row, add_special_tokens=False, return_offsets_mapping=True)
    mask = [int(any(a < end and start < b for a, b in spans)) for start, end in encoded["offset_mapping"]]
    return Sample("rows", prompt + list(encoded["input_ids"]), [0] * len(prompt) + mask)


def heldout_rows(
    pw: PageWorld, tokenizer: PreTrainedTokenizerBase, seed: int, limit: int, max_pages: int = 1
) -> list[Sample]:
    """:func:`row_gate_sample` over held-out entities' real pages (the corpus' own, ``seed``), each among up
    to ``max_pages - 1`` other held-out pages listed as search hits, asking 1-3 of its attributes in a random
    order: which value goes in which column is read from the header alone."""
    rng = random.Random(f"{seed}/heldout-rows")
    entities = [*pw.heldout.countries, *pw.heldout.cities]
    rng.shuffle(entities)
    out = []
    for entity in entities[:limit]:
        page = _page(pw.world, entity, seed)
        cells = page_cells(pw.world, entity, page["text"])
        if not cells:
            continue
        context = _among_hits(rng, page, entities, world=pw.world, seed=seed, max_pages=max_pages)
        out.append(row_gate_sample(tokenizer, context, entity, rng.sample(cells, min(len(cells), rng.randint(1, 3)))))
    return out


def heldout_questions(pw: PageWorld, seed: int, limit: int, max_pages: int = 1) -> list[tuple[str, str, str]]:
    """``(context, question, answer)`` over held-out entities' real pages (the corpus' own, ``seed``): the
    page asked about among up to ``max_pages - 1`` other held-out pages, listed as search hits."""
    rng = random.Random(f"{seed}/heldout")
    entities = [*pw.heldout.countries, *pw.heldout.cities]
    rng.shuffle(entities)
    out = []
    for entity in entities:
        page = _page(pw.world, entity, seed)
        context = _among_hits(rng, page, entities, world=pw.world, seed=seed, max_pages=max_pages)
        for question, answer in page_facts(pw.world, entity, page["text"]):
            out.append((context, question, answer))
    rng.shuffle(out)
    return out[:limit]
