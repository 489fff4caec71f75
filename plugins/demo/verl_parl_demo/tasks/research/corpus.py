"""Encyclopedia-like pages, one per country and one per city, with varied phrasing.

Each fact has several sentence templates; a page's facts come in a shuffled order (the opening
sentence stays first) and carry one to three distractor sentences, some of them true facts about
*other* entities (a neighbour's capital, another city's population) so that a careless reader picks
the wrong number. Everything is drawn from a ``random.Random`` seeded with ``(seed, docid)``: a page
does not change when other pages are added or removed.

A page is a dict ``{docid, title, text, url}``, written one per line to ``corpus.jsonl`` (the corpus format of
:mod:`verl_parl.tools.index`, which the registered ``search`` tool's indexer reads).
"""

from __future__ import annotations

import functools
import json
import random
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from verl_parl_demo.tasks.research.source import City, Country, World

Page = dict[str, str]


def number(value: int, rng: random.Random) -> str:
    """``66987244`` as ``"66,987,244"`` or ``"66987244"`` (both parse to the same number)."""
    return f"{value:,}" if rng.random() < 0.7 else str(value)


def as_written(value: str, page_text: str) -> str:
    """``value`` as ``page_text`` writes it: ``"7889094"`` as ``"7,889,094"`` when the page uses separators."""
    if value.lstrip("-").isdigit() and f"{int(value):,}" in page_text:
        return f"{int(value):,}"
    return value


def search_hit(rank: int, page: Page, score: float) -> str:
    """``page`` as the search tool lists a hit: ``[rank] title (docid: ..., score: ...)``, then its text
    (for text that must look like the tool's output without searching an index)."""
    return f"[{rank}] {page['title']} (docid: {page['docid']}, score: {score:.2f})\n{page['text']}"


def join_names(names: list[str]) -> str:
    """``["A", "B", "C"]`` → ``"A, B and C"``."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def _pick(rng: random.Random, templates: tuple[str, ...], **values: str) -> str:
    return rng.choice(templates).format(**values)


def geonames_url(geonameid: int) -> str:
    return f"https://www.geonames.org/{geonameid}"


def country_page(world: World, country: Country, seed: int) -> Page:
    """The page of ``country`` (see the module docstring)."""
    rng = random.Random(f"{seed}/{country.docid}")
    n = country.name
    opening = _pick(
        rng,
        (
            "{n} is a country in {c}.",
            "{n} is located in {c}.",
            "{n} lies in {c}.",
            "Geographically, {n} belongs to {c}.",
        ),
        n=n,
        c=country.continent,
    )
    facts = [
        _pick(
            rng,
            (
                "Its capital is {cap}.",
                "The capital of {n} is {cap}.",
                "{cap} serves as the capital of {n}.",
                "The seat of government of {n} is {cap}.",
            ),
            n=n,
            cap=country.capital,
        ),
        _pick(
            rng,
            (
                "{n} has a population of {p}.",
                "About {p} people live in {n}.",
                "The population of {n} was recorded as {p}.",
                "It is home to {p} inhabitants.",
            ),
            n=n,
            p=number(country.population, rng),
        ),
        _pick(
            rng,
            (
                "It covers an area of {a} square kilometres.",
                "{n} spans {a} km2.",
                "The total area of {n} is {a} km².",
            ),
            n=n,
            a=number(country.area_km2, rng),
        ),
        _pick(
            rng,
            ("Its ISO 3166 codes are {i} and {i3}.", "The ISO country codes of {n} are {i} (two letters) and {i3}."),
            n=n,
            i=country.iso,
            i3=country.iso3,
        ),
        *_country_optional_facts(world, country, rng),
    ]
    rng.shuffle(facts)
    sentences = [opening, *facts]
    for distractor in _country_distractors(world, country, rng):
        sentences.insert(rng.randint(1, len(sentences)), distractor)
    return {"docid": country.docid, "title": n, "text": " ".join(sentences), "url": geonames_url(country.geonameid)}


def _country_optional_facts(world: World, country: Country, rng: random.Random) -> list[str]:
    n, facts = country.name, []
    if country.currency:
        facts.append(
            _pick(
                rng,
                (
                    "The currency of {n} is the {cur} ({code}).",
                    "Payments in {n} are made in {cur}, currency code {code}.",
                    "{n} uses the {cur} ({code}) as its currency.",
                ),
                n=n,
                cur=country.currency,
                code=country.currency_code,
            )
        )
    if country.tld:
        facts.append(
            _pick(
                rng,
                ("Its country code top-level domain is {t}.", "Websites registered in {n} use the {t} domain."),
                n=n,
                t=country.tld,
            )
        )
    if country.phone:
        facts.append(
            _pick(
                rng,
                ("The international calling code of {n} is +{ph}.", "To call {n} from abroad, dial +{ph}."),
                n=n,
                ph=country.phone,
            )
        )
    neighbours = [world.countries[c].name for c in country.neighbours]
    rng.shuffle(neighbours)
    if neighbours:
        facts.append(
            _pick(
                rng,
                (
                    "{n} shares land borders with {nb}.",
                    "It borders {nb}.",
                    "The neighbouring countries of {n} are {nb}.",
                ),
                n=n,
                nb=join_names(neighbours),
            )
        )
    else:
        facts.append(_pick(rng, ("{n} has no land borders.", "No country shares a land border with {n}."), n=n))
    big = [world.cities[g].name for g in world.cities_of.get(country.iso, ())[:3]]
    if len(big) > 1:
        facts.append(_pick(rng, ("Major cities include {b}.", "Its largest cities are {b}."), b=join_names(big)))
    elif big:
        facts.append(f"Its largest city is {big[0]}.")
    return facts


def _neighbour_capital(other: Country) -> str:
    return f"The capital of neighbouring {other.name} is {other.capital}."


def _neighbour_population(other: Country, rng: random.Random) -> str:
    return f"For comparison, {other.name} has {number(other.population, rng)} inhabitants."


def _other_city_population(other: City, rng: random.Random) -> str:
    return f"{other.name}, another city of the country, has {number(other.population, rng)} residents."


def _country_distractors(world: World, country: Country, rng: random.Random) -> list[str]:
    options: list[Callable[[], str]] = [
        lambda: f"The name {country.name} appears in many historical records.",
        lambda: f"Local customs in {country.name} vary from region to region.",
        lambda: f"Travellers describe the landscape of {country.name} as varied.",
    ]
    for iso in country.neighbours:
        other = world.countries[iso]
        options.append(functools.partial(_neighbour_capital, other))
        options.append(functools.partial(_neighbour_population, other, rng))
    return [make() for make in rng.sample(options, k=min(len(options), rng.randint(1, 3)))]


def city_page(world: World, city: City, seed: int) -> Page:
    """The page of ``city``: its country, population, position and time zone (not its country's facts)."""
    rng = random.Random(f"{seed}/{city.docid}")
    n, country = city.name, world.countries[city.country].name
    opening = _pick(
        rng,
        ("{n} is a city in {c}.", "{n} is a city located in {c}.", "The city of {n} lies in {c}."),
        n=n,
        c=country,
    )
    facts = [
        _pick(
            rng,
            ("It has a population of {p}.", "{n} is home to {p} inhabitants.", "About {p} people live in {n}."),
            n=n,
            p=number(city.population, rng),
        ),
        _pick(
            rng,
            ("Its coordinates are {lat}, {lon}.", "{n} lies at latitude {lat} and longitude {lon}."),
            n=n,
            lat=f"{city.latitude:.2f}",
            lon=f"{city.longitude:.2f}",
        ),
        _pick(
            rng,
            ("The city observes the {tz} time zone.", "Local time in {n} follows the {tz} time zone."),
            n=n,
            tz=city.timezone,
        ),
    ]
    if city.is_capital:
        facts.append(_pick(rng, ("{n} is the capital of {c}.", "It is the capital city of {c}."), n=n, c=country))
    rng.shuffle(facts)
    sentences = [opening, *facts]
    for distractor in _city_distractors(world, city, rng):
        sentences.insert(rng.randint(1, len(sentences)), distractor)
    return {"docid": city.docid, "title": n, "text": " ".join(sentences), "url": geonames_url(city.geonameid)}


def _city_distractors(world: World, city: City, rng: random.Random) -> list[str]:
    options: list[Callable[[], str]] = [
        lambda: f"Visitors often reach {city.name} by road or rail.",
        lambda: f"{city.name} has a long local history.",
    ]
    for gid in world.cities_of.get(city.country, ()):
        other = world.cities[gid]
        if other.geonameid != city.geonameid:
            options.append(functools.partial(_other_city_population, other, rng))
    return [make() for make in rng.sample(options, k=min(len(options), rng.randint(1, 2)))]


def iter_pages(world: World, seed: int) -> Iterator[Page]:
    """Every page: countries by ISO code, then cities by geonameid."""
    for iso in sorted(world.countries):
        yield country_page(world, world.countries[iso], seed)
    for gid in sorted(world.cities):
        yield city_page(world, world.cities[gid], seed)


def write_corpus(pages: Iterable[Page], path: Path, on_page: Callable[[], Any] | None = None) -> int:
    """Write ``pages`` as JSONL to ``path``; returns the number of pages."""
    path.parent.mkdir(parents=True, exist_ok=True)
    count = 0
    with path.open("w", encoding="utf-8") as stream:
        for page in pages:
            stream.write(json.dumps(page, ensure_ascii=False) + "\n")
            count += 1
            if on_page is not None:
                on_page()
    return count
