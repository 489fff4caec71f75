"""Long pages for the ``widechain`` family: the research suite's page, then related entries up to a length.

Each page starts with the research suite's own page for the entity
(:func:`verl_parl_demo.tasks.research.corpus.iter_pages`: its facts, phrasing and distractors), then a paragraph of
*related entries*: true one-sentence facts about other countries and cities **of the same split's country pool** (so a
training page never states a held-out fact) and of another country than the page's entity (so a city's page never names
its country's capital, nor states the capital's population: no page gives a later hop of its own chain), drawn with a
``random.Random`` seeded by ``(seed, docid)``, until the page reaches ``page_chars`` characters. The entries never name
the page's own entity, so every fact about it stays on its own page; they make the page long (~780 tokens of the tiny
model at the default 2,100 characters), which is what puts one page, not two, in a 2,048-token context
(:mod:`verl_parl_demo.tasks.widechain.design`).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping

from verl_parl_demo.tasks.research import corpus as research_corpus
from verl_parl_demo.tasks.research.source import World

Page = dict[str, str]

RELATED = "Related entries."


def _country_entry(world: World, iso: str, rng: random.Random) -> str:
    c = world.countries[iso]
    choices = [f"The capital of {c.name} is {c.capital}." if c.capital else ""]
    choices.append(f"{c.name} is home to {research_corpus.number(c.population, rng)} people." if c.population else "")
    choices.append(f"{c.name} uses the {c.currency} ({c.currency_code})." if c.currency_code else "")
    choices.append(
        f"{c.name} covers {research_corpus.number(int(c.area_km2), rng)} square kilometres." if c.area_km2 else ""
    )
    choices.append(f"The calling code of {c.name} is +{c.phone}." if c.phone else "")
    return rng.choice([s for s in choices if s] or [f"{c.name} is a country in {c.continent}."])


def _city_entry(world: World, geonameid: int, rng: random.Random) -> str:
    city = world.cities[geonameid]
    country = world.countries[city.country].name
    return rng.choice(
        (
            f"{city.name}, a city of {country}, has {research_corpus.number(city.population, rng)} inhabitants.",
            f"{city.name} observes the {city.timezone} time zone.",
            f"{city.name} lies at latitude {city.latitude:.2f} and longitude {city.longitude:.2f}.",
        )
    )


def pad(page: Page, world: World, seed: int, page_chars: int, pool: tuple[str, ...]) -> Page:
    """``page`` with related entries about the countries ``pool`` (ISO codes) but the page's own country, and
    their cities, appended until its text holds at least ``page_chars`` characters."""
    rng = random.Random(f"{seed}/widechain/{page['docid']}")
    own = page["title"]
    home = world.entity_country(page["docid"])
    isos = sorted(iso for iso in pool if iso != home)
    cities = sorted(g for iso in isos for g in world.cities_of.get(iso, ()))
    entries: list[str] = []
    length = len(page["text"]) + 2 + len(RELATED)
    while length < page_chars:
        if rng.random() < 0.5:
            sentence = _country_entry(world, rng.choice(isos), rng)
        else:
            sentence = _city_entry(world, rng.choice(cities), rng)
        if own in sentence or sentence in entries:
            continue
        entries.append(sentence)
        length += len(sentence) + 1
    text = page["text"] + "\n\n" + " ".join([RELATED, *entries]) if entries else page["text"]
    return {**page, "text": text}


def iter_pages(world: World, seed: int, page_chars: int, pools: Mapping[str, tuple[str, ...]]) -> Iterator[Page]:
    """Every page of the research suite's corpus for ``seed``, padded to ``page_chars`` characters with entries
    of its entity's pool (``pools``: split -> country ISO codes, disjoint)."""
    pool_of = {iso: pool for pool in pools.values() for iso in pool}
    for page in research_corpus.iter_pages(world, seed):
        yield pad(page, world, seed, page_chars, pool_of[world.entity_country(page["docid"])])
