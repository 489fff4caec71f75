"""Wide and deep research tasks over a :class:`~verl_parl_demo.tasks.research.source.World`.

*Wide* tasks (WideSearch style, PARL_FACTS §3) ask for a markdown table: one row per entity, one
column per attribute. Each entity's facts sit on its own page, so the lookups are independent and
reward parallel subagents. Types:

* ``wide_countries``: N given countries × 2–3 of capital, population, area, currency code, continent,
  calling code, top-level domain;
* ``wide_cities``: N given cities × 2–3 of country, population, time zone, latitude, longitude;
* ``wide_neighbours``: every country bordering X (the rows must be discovered on X's page first)
  × 2 attributes.

*Deep* tasks chain lookups, each hop's answer naming the next page to read:

* ``capital_population``: country → capital city page → population (2 hops);
* ``city_country_capital``: city page → its country's page → capital (2 hops);
* ``city_country_currency``: city page → country page → currency code (2 hops);
* ``city_capital_population``: city → country → capital city page → population (3 hops);
* ``common_neighbour``: the only country bordering both A and B (2 pages, then an intersection);
* ``larger_capital``: the more populous of the capitals of A and B (4 pages).

A task only uses entities of the pool it is drawn from (countries, and cities through their
country), which is what makes the entity splits of :mod:`verl_parl_demo.tasks.research.dataset` possible.
"""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import random
from collections.abc import Callable, Collection, Mapping
from itertools import combinations

from verl_parl_demo.tasks.research.source import City, Country, World

WIDE, DEEP = "wide", "deep"


@dataclasses.dataclass(frozen=True)
class Task:
    """One task. Wide: ``columns``/``rows`` hold the gold table keyed by ``key``; deep: ``answer``."""

    kind: str
    type: str
    question: str
    entities: tuple[str, ...]  # docids of every entity the question or the gold mentions
    gold_docids: tuple[str, ...]  # pages that hold the facts needed
    hops: int
    answer: str = ""
    key: str = ""
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[str, ...], ...] = ()

    @property
    def task_id(self) -> str:
        return hashlib.sha256(f"{self.type}\n{self.question}".encode()).hexdigest()[:16]

    @property
    def ground_truth(self) -> str:
        """Deep: the short answer. Wide: the gold table as CSV (the ``table`` scorer's ground-truth form)."""
        return gold_csv(self.columns, self.rows) if self.kind == WIDE else self.answer


def gold_csv(columns: tuple[str, ...], rows: tuple[tuple[str, ...], ...]) -> str:
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(columns)
    writer.writerows(rows)
    return buffer.getvalue()


# --- attributes (table columns) ---------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Attribute:
    """A table column: header, metric of the ``table`` scorer, phrase for the question, value getter."""

    column: str
    metric: str
    phrase: str
    value: Callable[[World, object], str | None]


def _country_attr(column: str, metric: str, phrase: str, get: Callable[[Country], object]) -> Attribute:
    def value(world: World, entity: object) -> str | None:
        assert isinstance(entity, Country)
        got = get(entity)
        return str(got) if got not in ("", None, 0) else None

    return Attribute(column, metric, phrase, value)


def _city_attr(column: str, metric: str, phrase: str, get: Callable[[World, City], object]) -> Attribute:
    def value(world: World, entity: object) -> str | None:
        assert isinstance(entity, City)
        got = get(world, entity)
        return str(got) if got not in ("", None) else None

    return Attribute(column, metric, phrase, value)


COUNTRY_ATTRIBUTES = (
    _country_attr("capital", "exact", "the capital", lambda c: c.capital),
    _country_attr("population", "number", "the population", lambda c: c.population),
    _country_attr("area (km2)", "number", "the area in square kilometres", lambda c: c.area_km2),
    _country_attr("currency code", "exact", "the ISO code of the currency", lambda c: c.currency_code),
    _country_attr("continent", "exact", "the continent", lambda c: c.continent),
    _country_attr(
        "calling code", "number", "the international calling code", lambda c: c.phone if c.phone.isdigit() else None
    ),
    _country_attr("top-level domain", "exact", "the country code top-level domain", lambda c: c.tld),
)
CITY_ATTRIBUTES = (
    _city_attr("country", "exact", "the country", lambda w, c: w.countries[c.country].name),
    _city_attr("population", "number", "the population", lambda w, c: c.population),
    _city_attr("time zone", "exact", "the time zone", lambda w, c: c.timezone),
    _city_attr("latitude", "number", "the latitude", lambda w, c: f"{c.latitude:.2f}"),
    _city_attr("longitude", "number", "the longitude", lambda w, c: f"{c.longitude:.2f}"),
)
ATTRIBUTES: dict[str, dict[str, Attribute]] = {
    "country": {a.column: a for a in COUNTRY_ATTRIBUTES},
    "city": {a.column: a for a in CITY_ATTRIBUTES},
}
"""Every attribute by page kind and column: ``ATTRIBUTES["city"]["country"]``."""
CHAINS: dict[str, tuple[tuple[str, str], ...]] = {
    "capital_population": (("country", "capital"), ("city", "population")),
    "city_country_capital": (("city", "country"), ("country", "capital")),
    "city_country_currency": (("city", "country"), ("country", "currency code")),
    "city_capital_population": (("city", "country"), ("country", "capital"), ("city", "population")),
}
"""The deep task types that are chains: page after page, the page's kind and the column it gives, which
names the next page (the last one's is the answer). Followed one page at a time by the orchestrator's
demonstrations (``DEEP_HOPS``) and by the reader's pretraining (``hop_sample``)."""
NEIGHBOUR_ATTRIBUTES = tuple(
    a for a in COUNTRY_ATTRIBUTES if a.column in ("capital", "population", "currency code", "area (km2)")
)

METRICS: dict[str, str] = {a.column: a.metric for a in (*COUNTRY_ATTRIBUTES, *CITY_ATTRIBUTES)} | {"city": "exact"}
"""Metric of every column any wide task uses (one map for all rows, so parquet sees one schema)."""

ALIASES: dict[str, list[str]] = {
    "country": ["country name", "nation", "name"],
    "city": ["city name", "name"],
    "capital": ["capital city"],
    "population": ["inhabitants", "pop", "population (people)"],
    "area (km2)": ["area", "area km2", "area (km²)", "area in km2", "area (sq km)", "area (square kilometres)"],
    "currency code": ["currency", "currency (iso code)", "iso currency code", "currency iso code"],
    "continent": ["region"],
    "calling code": ["phone code", "dialing code", "dialling code", "international calling code"],
    "top-level domain": ["tld", "domain", "cctld", "country code top-level domain"],
    "time zone": ["timezone", "tz"],
    "latitude": ["lat"],
    "longitude": ["lon", "lng", "long"],
}
"""Header aliases accepted by the ``table`` scorer (same map for every row)."""


# --- samplers ----------------------------------------------------------------------------------

Sampler = Callable[[random.Random], Task]


@dataclasses.dataclass(frozen=True)
class Pool:
    """The entities a split may use: its countries and their cities."""

    countries: tuple[Country, ...]
    cities: tuple[City, ...]

    @classmethod
    def of(cls, world: World, isos: Collection[str]) -> Pool:
        keep = set(isos)
        return cls(
            tuple(world.countries[i] for i in sorted(keep)),
            tuple(c for _, c in sorted(world.cities.items()) if c.country in keep),
        )

    def has_country(self, iso: str) -> bool:
        return any(c.iso == iso for c in self.countries)


def table_question(noun: str, names: list[str], attrs: tuple[Attribute, ...], rng: random.Random) -> str:
    wanted = ", ".join(a.phrase for a in attrs[:-1]) + f" and {attrs[-1].phrase}"
    header = "| " + " | ".join([noun, *(a.column for a in attrs)]) + " |"
    listing = "; ".join(names)
    opening = rng.choice(
        (
            f"For each of these {len(names)} {noun_plural(noun)}, find {wanted}: {listing}.",
            f"Look up {wanted} of each of the following {noun_plural(noun)}: {listing}.",
            f"I need {wanted} for every one of these {len(names)} {noun_plural(noun)}: {listing}.",
        )
    )
    return f"{opening} Answer with a markdown table with the columns {header}, one row per {noun}."


def noun_plural(noun: str) -> str:
    return {"country": "countries", "city": "cities"}[noun]


def _pick_attrs(
    rng: random.Random, attrs: tuple[Attribute, ...], k_min: int = 2, k_max: int = 3
) -> tuple[Attribute, ...]:
    chosen = rng.sample(range(len(attrs)), k=rng.randint(k_min, min(k_max, len(attrs))))
    return tuple(attrs[i] for i in sorted(chosen))


def _wide_given(
    world: World,
    *,
    noun: str,
    entities: tuple[Country, ...] | tuple[City, ...],
    attrs: tuple[Attribute, ...],
    wide_min: int,
    wide_max: int,
    type_name: str,
) -> Sampler | None:
    if len(entities) < wide_min:
        return None
    values = [{a.column: a.value(world, e) for a in attrs} for e in entities]  # computed once, not per draw
    usable_for: dict[tuple[str, ...], list[int]] = {}  # attribute columns → entities having them all

    def sample(rng: random.Random) -> Task:
        chosen_attrs = _pick_attrs(rng, attrs)
        columns = tuple(a.column for a in chosen_attrs)
        if columns not in usable_for:
            usable_for[columns] = [i for i, v in enumerate(values) if all(v[c] is not None for c in columns)]
        usable = usable_for[columns]
        if len(usable) < wide_min:
            raise _NoTaskError
        chosen = rng.sample(usable, k=rng.randint(wide_min, min(wide_max, len(usable))))
        picked = [entities[i] for i in chosen]
        names = [e.name for e in picked]
        rows = tuple((entities[i].name, *(str(values[i][a.column]) for a in chosen_attrs)) for i in chosen)
        extra = [world.countries[e.country].docid for e in picked if isinstance(e, City)]
        docids = [e.docid for e in picked]
        return Task(
            kind=WIDE,
            type=type_name,
            question=table_question(noun, names, chosen_attrs, rng),
            entities=tuple(dict.fromkeys(docids + extra)),
            gold_docids=tuple(docids),
            hops=1,
            key=noun,
            columns=(noun, *(a.column for a in chosen_attrs)),
            rows=rows,
        )

    return sample


class _NoTaskError(Exception):
    """This draw found no valid task; the caller draws again."""


def wide_countries(world: World, pool: Pool, wide_min: int, wide_max: int) -> Sampler | None:
    return _wide_given(
        world,
        noun="country",
        entities=pool.countries,
        attrs=COUNTRY_ATTRIBUTES,
        wide_min=wide_min,
        wide_max=wide_max,
        type_name="wide_countries",
    )


def wide_cities(world: World, pool: Pool, wide_min: int, wide_max: int) -> Sampler | None:
    cities = tuple(c for c in pool.cities if c.unique)
    return _wide_given(
        world,
        noun="city",
        entities=cities,
        attrs=CITY_ATTRIBUTES,
        wide_min=wide_min,
        wide_max=wide_max,
        type_name="wide_cities",
    )


def wide_neighbours(world: World, pool: Pool, wide_min: int, wide_max: int) -> Sampler | None:
    candidates = [
        c
        for c in pool.countries
        if wide_min <= len(c.neighbours) <= wide_max and all(pool.has_country(n) for n in c.neighbours)
    ]
    if not candidates:
        return None

    def sample(rng: random.Random) -> Task:
        center = rng.choice(candidates)
        attrs = _pick_attrs(rng, NEIGHBOUR_ATTRIBUTES, 2, 2)
        neighbours = [world.countries[n] for n in center.neighbours]
        if any(a.value(world, n) is None for a in attrs for n in neighbours):
            raise _NoTaskError
        rng.shuffle(neighbours)
        wanted = f"{attrs[0].phrase} and {attrs[1].phrase}"
        header = "| " + " | ".join(["country", *(a.column for a in attrs)]) + " |"
        opening = rng.choice(
            (
                f"List every country that shares a land border with {center.name}, with {wanted} of each.",
                f"Which countries border {center.name}? For each of them give {wanted}.",
            )
        )
        return Task(
            kind=WIDE,
            type="wide_neighbours",
            question=f"{opening} Answer with a markdown table with the columns {header}, one row per country.",
            entities=(center.docid, *(n.docid for n in neighbours)),
            gold_docids=(center.docid, *(n.docid for n in neighbours)),
            hops=2,
            key="country",
            columns=("country", *(a.column for a in attrs)),
            rows=tuple((n.name, *(str(a.value(world, n)) for a in attrs)) for n in neighbours),
        )

    return sample


def _deep(type_name: str, question: str, answer: str, pages: list[str], hops: int) -> Task:
    return Task(
        kind=DEEP,
        type=type_name,
        question=question,
        entities=tuple(dict.fromkeys(pages)),
        gold_docids=tuple(pages),
        hops=hops,
        answer=answer,
    )


def capital_population(world: World, pool: Pool) -> Sampler | None:
    candidates = [c for c in pool.countries if world.capital_city(c.iso) is not None]
    if not candidates:
        return None

    def sample(rng: random.Random) -> Task:
        country = rng.choice(candidates)
        capital = world.capital_city(country.iso)
        assert capital is not None
        question = rng.choice(
            (
                f"What is the population of the capital of {country.name}?",
                f"How many people live in the capital city of {country.name}?",
            )
        )
        return _deep("capital_population", question, str(capital.population), [country.docid, capital.docid], 2)

    return sample


def _unique_cities(pool: Pool, *, capitals: bool = False) -> list[City]:
    return [c for c in pool.cities if c.unique and (capitals or not c.is_capital)]


def _city_country_sampler(
    world: World, candidates: list[City], kind: str, templates: tuple[str, str], answer: Callable[[Country], str]
) -> Sampler | None:
    """Two-hop questions city -> its country -> ``answer(country)``; ``templates`` take ``{city}``."""
    if not candidates:
        return None

    def sample(rng: random.Random) -> Task:
        city = rng.choice(candidates)
        country = world.countries[city.country]
        question = rng.choice(tuple(t.format(city=city.name) for t in templates))
        return _deep(kind, question, answer(country), [city.docid, country.docid], 2)

    return sample


def city_country_capital(world: World, pool: Pool) -> Sampler | None:
    templates = (
        "What is the capital of the country in which the city of {city} lies?",
        "{city} is a city. Name the capital of the country it is in.",
    )
    return _city_country_sampler(world, _unique_cities(pool), "city_country_capital", templates, lambda c: c.capital)


def city_country_currency(world: World, pool: Pool) -> Sampler | None:
    candidates = [c for c in _unique_cities(pool, capitals=True) if world.countries[c.country].currency_code]
    templates = (
        "Which currency is used in the country where {city} is located? Give its three-letter code.",
        "What is the ISO code of the currency of the country that the city of {city} belongs to?",
    )
    return _city_country_sampler(world, candidates, "city_country_currency", templates, lambda c: c.currency_code)


def city_capital_population(world: World, pool: Pool) -> Sampler | None:
    candidates = [c for c in _unique_cities(pool) if world.capital_city(c.country) is not None]
    if not candidates:
        return None

    def sample(rng: random.Random) -> Task:
        city = rng.choice(candidates)
        country = world.countries[city.country]
        capital = world.capital_city(city.country)
        assert capital is not None
        question = rng.choice(
            (
                f"What is the population of the capital of the country where {city.name} is located?",
                f"How many inhabitants does the capital of the country containing the city of {city.name} have?",
            )
        )
        pages = [city.docid, country.docid, capital.docid]
        return _deep("city_capital_population", question, str(capital.population), pages, 3)

    return sample


def common_neighbour(world: World, pool: Pool) -> Sampler | None:
    """Pairs (A, B) of pool countries whose only common neighbour in the whole world is in the pool."""
    in_pool = {c.iso for c in pool.countries}
    pairs: list[tuple[str, str, str]] = []
    for middle in sorted(in_pool):
        around = [n for n in world.countries[middle].neighbours if n in in_pool]
        for a, b in combinations(around, 2):
            common = set(world.countries[a].neighbours) & set(world.countries[b].neighbours)
            if common == {middle}:
                pairs.append((a, b, middle))
    if not pairs:
        return None

    def sample(rng: random.Random) -> Task:
        a, b, middle = rng.choice(pairs)
        if rng.random() < 0.5:
            a, b = b, a
        first, second, answer = world.countries[a], world.countries[b], world.countries[middle]
        question = f"Which country shares a land border with both {first.name} and {second.name}?"
        return _deep("common_neighbour", question, answer.name, [first.docid, second.docid], 2)

    return sample


def larger_capital(world: World, pool: Pool) -> Sampler | None:
    candidates = [
        (c, cap) for c in pool.countries if (cap := world.capital_city(c.iso)) is not None and cap.name == c.capital
    ]
    if len(candidates) < 2:
        return None

    def sample(rng: random.Random) -> Task:
        (a, cap_a), (b, cap_b) = rng.sample(candidates, 2)
        if cap_a.population == cap_b.population or cap_a.name == cap_b.name:
            raise _NoTaskError
        answer = cap_a if cap_a.population > cap_b.population else cap_b
        question = (
            f"Which city has more inhabitants: the capital of {a.name} or the capital of {b.name}? "
            "Answer with the name of the city."
        )
        pages = [a.docid, b.docid, cap_a.docid, cap_b.docid]
        return _deep("larger_capital", question, answer.name, pages, 2)

    return sample


WIDE_TYPES: Mapping[str, Callable[[World, Pool, int, int], Sampler | None]] = {
    "wide_countries": wide_countries,
    "wide_cities": wide_cities,
    "wide_neighbours": wide_neighbours,
}
DEEP_TYPES: Mapping[str, Callable[[World, Pool], Sampler | None]] = {
    "capital_population": capital_population,
    "city_country_capital": city_country_capital,
    "city_country_currency": city_country_currency,
    "city_capital_population": city_capital_population,
    "common_neighbour": common_neighbour,
    "larger_capital": larger_capital,
}


class NotEnoughTasksError(ValueError):
    """The pool cannot supply the requested number of distinct tasks of a kind."""


def draw_tasks(
    world: World,
    pool: Pool,
    *,
    n_wide: int,
    n_deep: int,
    rng: random.Random,
    wide_min: int,
    wide_max: int,
    seen: set[str],
    split: str = "",
    on_task: Callable[[], object] | None = None,
) -> list[Task]:
    """``n_wide`` wide then ``n_deep`` deep distinct tasks (types drawn uniformly among those the pool supports)."""
    wide = {name: make(world, pool, wide_min, wide_max) for name, make in WIDE_TYPES.items()}
    deep = {name: make(world, pool) for name, make in DEEP_TYPES.items()}
    tasks: list[Task] = []
    for kind, count, samplers in ((WIDE, n_wide, wide), (DEEP, n_deep, deep)):
        available = [s for _, s in sorted(samplers.items()) if s is not None]
        if count and not available:
            raise NotEnoughTasksError(f"split {split!r}: its {len(pool.countries)} countries support no {kind} task")
        made, attempts = 0, 0
        while made < count:
            attempts += 1
            if attempts > 50 * count + 200:
                raise NotEnoughTasksError(
                    f"split {split!r}: found only {made} distinct {kind} tasks of {count} requested among "
                    f"{len(pool.countries)} countries; ask for fewer or give the split more entities"
                )
            try:
                task = rng.choice(available)(rng)
            except _NoTaskError:
                continue
            if task.question not in seen:
                seen.add(task.question)
                tasks.append(task)
                made += 1
                if on_task is not None:
                    on_task()
    return tasks
