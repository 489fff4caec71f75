"""Pretraining curriculum: its samples, its schedule, held-out entities kept out, the shipped weights."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import dataclasses
import json
import random
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase
from verl_parl_demo.modelbuild import pretrain as pt
from verl_parl_demo.modelbuild import samples, shipped
from verl_parl_demo.modelbuild.pretrain import PretrainSpec, mixture_at, scaled_phases
from verl_parl_demo.modelbuild.samples import (
    LIST_CUES,
    Sample,
    induction_sample,
    list_sample,
    lookup_sample,
    page_facts,
    page_sample,
    page_world,
    walk_sample,
)
from verl_parl_demo.modelbuild.tiny import MARKER_NAME, TinyModelSpec, build_tiny_model

SMALL = TinyModelSpec(
    vocab_size=512,
    hidden_size=32,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    intermediate_size=64,
    max_position_embeddings=1024,
)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory: pytest.TempPathFactory) -> PreTrainedTokenizerBase:
    return AutoTokenizer.from_pretrained(build_tiny_model(SMALL, tmp_path_factory.mktemp("cache"), progress=False))


def test_induction_sample_copies_a_span_and_scores_the_copy() -> None:
    rng = random.Random(3)
    for _ in range(50):
        sample = induction_sample(rng, list(range(100, 400)), length=48, span=8)
        assert len(sample.input_ids) == len(sample.loss_mask) == 48
        scored = [i for i, m in enumerate(sample.loss_mask) if m]
        assert len(scored) == 7 and scored == list(range(scored[0], scored[0] + 7))
        target = scored[0] - 1  # the copy's first token is not scored: nothing announces it
        copy = sample.input_ids[target : target + 8]
        earlier = [sample.input_ids[i : i + 8] for i in range(0, target - 8 + 1)]
        assert copy in earlier


def test_lookup_sample_answers_are_in_the_context(tokenizer: PreTrainedTokenizerBase) -> None:
    sample = lookup_sample(random.Random(0), tokenizer, n_facts=6, n_questions=3)
    text = tokenizer.decode(sample.input_ids)
    context = text.partition("\nQuestion:")[0]
    answers = _scored_spans(tokenizer, sample)
    assert len(answers) == 3
    for answer in answers:
        assert answer.endswith("\n") and answer.strip() in context


def _scored_spans(tokenizer: PreTrainedTokenizerBase, sample: pt.Sample) -> list[str]:
    spans, current = [], []
    for token, mask in zip(sample.input_ids, sample.loss_mask, strict=True):
        if mask:
            current.append(token)
        elif current:
            spans.append(tokenizer.decode(current))
            current = []
    if current:
        spans.append(tokenizer.decode(current))
    return spans


def test_page_samples_read_redrawn_training_pages(tokenizer: PreTrainedTokenizerBase) -> None:
    pw = page_world(0)
    train_names = {e.name for e in (*pw.train.countries, *pw.train.cities)}
    heldout_names = {c.name for c in pw.heldout.countries} - train_names
    rng = random.Random(1)
    samples = [s for s in (page_sample(rng, tokenizer, pw, 2) for _ in range(30)) if s is not None]
    assert len(samples) >= 25
    for sample in samples:
        text = tokenizer.decode(sample.input_ids)
        page = text.partition("\nQuestion:")[0]
        for answer in _scored_spans(tokenizer, sample):
            assert answer.strip() in page
        asked = [line.rsplit(" of ", 1)[1].rstrip("?") for line in text.splitlines() if line.startswith("Question:")]
        assert asked and all(name in train_names and name not in heldout_names for name in asked)


def test_row_samples_reply_with_the_headers_columns_read_from_the_pages(tokenizer: PreTrainedTokenizerBase) -> None:
    pw = page_world(0)
    rng = random.Random(2)
    samples = [s for s in (page_sample(rng, tokenizer, pw, 2, max_pages=3, row_share=1.0) for _ in range(20)) if s]
    assert len(samples) >= 15
    for sample in samples:
        text = tokenizer.decode(sample.input_ids)
        pages, _, tasks = text.partition("\nFind ")
        lines = ("Find " + tasks).splitlines()
        prompts, rows = lines[0::2], lines[1::2]
        assert rows and len(prompts) == len(rows)
        assert "".join(_scored_spans(tokenizer, sample)).split() == " ".join(rows).split()  # the loss is on the rows
        for prompt, row in zip(prompts, rows, strict=True):
            header = prompt.partition("Reply with one table row: ")[2]
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert len(cells) == header.count("|") - 1  # one cell per column
            assert cells[0] == prompt.partition(" of ")[2].partition(". Reply")[0] or f" of {cells[0]}." in prompt
            assert all(cell in pages for cell in cells)  # every value is read from the listed pages


def test_task_first_samples_put_one_task_before_the_hits_and_score_its_answer(
    tokenizer: PreTrainedTokenizerBase,
) -> None:
    pw = page_world(0)
    rng = random.Random(3)
    samples = [s for s in (page_sample(rng, tokenizer, pw, 3, row_share=0.5, task_first=1.0) for _ in range(30)) if s]
    assert len(samples) >= 25
    kinds = set()
    for sample in samples:
        text = tokenizer.decode(sample.input_ids)
        task, hits_and_answer = text.split("\n", 1)
        hits, answer = hits_and_answer.rstrip("\n").rsplit("\n", 1)
        assert task.startswith(("Question: ", "Find ")) and hits.startswith("[1] ")
        assert "Question:" not in hits and "Reply with one table row" not in hits  # the one task comes first
        scored = "".join(_scored_spans(tokenizer, sample)).strip()
        assert scored and answer.endswith(scored)  # the loss is on the answer after the hits, nothing else
        cells = [c.strip() for c in scored.strip("|").split("|")] if task.startswith("Find ") else [scored]
        assert all(cell in hits for cell in cells)  # every value is read from the listed pages
        kinds.add(task.split()[0])
    assert kinds == {"Question:", "Find"}


def test_walk_samples_hand_out_the_listed_names_in_order(tokenizer: PreTrainedTokenizerBase) -> None:
    pw = page_world(0)
    train_names = {e.name for e in (*pw.train.countries, *pw.train.cities)}
    rng = random.Random(4)
    serial = 0
    for _ in range(20):
        sample = walk_sample(rng, tokenizer, pw)
        question, *lines = tokenizer.decode(sample.input_ids).splitlines()
        listed = question.split(": ", 1)[1].split(". Answer with")[0].split("; ")
        assert 2 <= len(listed) <= 5 and set(listed) <= train_names
        tasks = [line for line in lines if line.startswith("Find ")]
        assert [t.partition(". Reply")[0].rpartition(" of ")[2] for t in tasks] == listed
        assert [span.strip() for span in _scored_spans(tokenizer, sample)] == listed  # the loss is on the names
        serial += len(lines) == 2 * len(tasks)  # a made-up row after every task
    assert 0 < serial < 20
    assert walk_sample(random.Random(9), tokenizer, pw) == walk_sample(random.Random(9), tokenizer, pw)  # seeded


def test_walk_ends_score_where_a_parallel_turn_goes_on_and_where_it_stops(tokenizer: PreTrainedTokenizerBase) -> None:
    pw = page_world(0)
    go_on = tokenizer.decode(tokenizer("Find", add_special_tokens=False)["input_ids"][:1])  # a task's first token
    for seed in range(6):
        names_only = walk_sample(random.Random(seed), tokenizer, pw, serial=False)
        both = walk_sample(random.Random(seed), tokenizer, pw, score=("names", "ends"), serial=False)
        ends = walk_sample(random.Random(seed), tokenizer, pw, score=("ends",), serial=False)
        assert both.input_ids == [*names_only.input_ids, tokenizer.eos_token_id]  # the turn ends after the list
        listed = _scored_spans(tokenizer, names_only)
        decisions = _scored_spans(tokenizer, ends)
        assert decisions == [go_on] * (len(listed) - 1) + [tokenizer.eos_token]  # go on after each name but the last
        expected = [listed[0], *(span for name in listed[1:] for span in (go_on, name)), tokenizer.eos_token]
        assert _scored_spans(tokenizer, both) == expected
    serial = walk_sample(random.Random(0), tokenizer, pw, score=("names", "ends"), serial=True)
    plain = walk_sample(random.Random(0), tokenizer, pw, serial=True)
    assert serial.input_ids[: len(plain.input_ids)] == plain.input_ids  # the plan, then its answer
    answer = tokenizer.decode(serial.input_ids[len(plain.input_ids) :])
    brought_back = [line for line in tokenizer.decode(plain.input_ids).splitlines() if line.startswith("| ")]
    assert answer.splitlines()[0] == "Answer:" and answer.endswith(f"|\n{tokenizer.eos_token}")
    assert answer.splitlines()[3:-1] == brought_back  # header and rule, then every row in order, then the end
    assert _scored_spans(tokenizer, serial)[-1] == "".join(line + "\n" for line in brought_back) + tokenizer.eos_token
    with pytest.raises(ValueError, match="must name some of"):
        walk_sample(random.Random(0), tokenizer, pw, score=("stops",))


def test_exact_counts_tokens_samples_and_spans() -> None:
    class Oracle(torch.nn.Module):  # predicts every next token, except the ones listed as wrong
        def __init__(self, wrong: set[tuple[int, int]]) -> None:
            super().__init__()
            self.wrong = wrong

        def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> SimpleNamespace:
            logits = torch.zeros(*input_ids.shape, 16)
            logits[:, :-1].scatter_(2, input_ids[:, 1:, None], 1.0)
            for row, position in self.wrong:
                logits[row, position] = 0
                logits[row, position, 0] = 1.0
            return SimpleNamespace(logits=logits)

    samples_ = [
        Sample("s", [5, 6, 7, 8, 9, 10], [0, 1, 1, 0, 1, 1]),
        Sample("s", [5, 6, 7, 8, 9, 10], [0, 0, 1, 0, 0, 1]),
    ]
    assert pt._exact(Oracle(set()), samples_, pad_id=0) == (1.0, 1.0, 1.0)
    # sample 0 gets token 7 (predicted at position 1) wrong: one of its two spans and one of 6 tokens
    assert pt._exact(Oracle({(0, 1)}), samples_, pad_id=0) == (5 / 6, 0.5, 3 / 4)


def test_redrawn_facts_differ_from_the_real_ones() -> None:
    pw = page_world(0)
    country = pw.train.countries[0]
    rng = random.Random(0)
    redrawn = [samples._redrawn(pw.world, country, rng) for _ in range(5)]
    assert all(r.name == country.name for r in redrawn)
    assert sum(r.population != country.population for r in redrawn) >= 4


def test_page_facts_use_the_pages_own_writing() -> None:
    pw = page_world(0)
    country = pw.heldout.countries[0]
    text = samples._page(pw.world, country, 0)["text"]
    facts = dict(page_facts(pw.world, country, text))
    assert facts and all(answer in text for answer in facts.values())
    assert any(q.startswith("What is the population of") for q in facts)


def test_heldout_questions_only_ask_about_heldout_entities() -> None:
    pw = page_world(0)
    heldout = {e.name for e in (*pw.heldout.countries, *pw.heldout.cities)}
    questions = samples.heldout_questions(pw, 0, 64)
    assert len(questions) == 64
    assert all(q.rsplit(" of ", 1)[1].rstrip("?") in heldout for _, q, _ in questions)


def test_heldout_rows_score_the_asked_values_of_heldout_entities(tokenizer: PreTrainedTokenizerBase) -> None:
    """The row gate: a row task over held-out pages, scored on its values in the header's order, not the name."""
    pw = page_world(0)
    heldout = {e.name: e for e in (*pw.heldout.countries, *pw.heldout.cities)}
    rows = samples.heldout_rows(pw, tokenizer, 0, 40, max_pages=3)
    assert len(rows) >= 35
    orders = set()
    for sample in rows:
        text = tokenizer.decode(sample.input_ids)
        hits, task, row = text.rstrip("\n").rsplit("\n", 2)
        name = task.partition(". Reply")[0].rpartition(" of ")[2]
        header = [c.strip() for c in task.partition("table row: ")[2].strip("|").split("|")]
        cells = [c.strip() for c in row.strip("|").split("|")]
        assert name in heldout and cells[0] == name and f"] {name} (docid" in hits
        assert len(cells) == len(header) and all(cell in hits for cell in cells[1:])
        page = samples._page(pw.world, heldout[name], 0)["text"]
        on_page = {a.column: v for a, v in samples.page_cells(pw.world, heldout[name], page)}
        assert cells[1:] == [on_page[column] for column in header[1:]]  # each value under its own column
        assert " ".join(_scored_spans(tokenizer, sample)).split() == " ".join(cells[1:]).split()  # values only
        orders.add(tuple(header[1:]))
    assert len(orders) > 10  # attributes asked in many combinations and orders
    assert samples.heldout_rows(pw, tokenizer, 0, 5) == samples.heldout_rows(pw, tokenizer, 0, 5)  # seeded


def test_hop_samples_follow_a_chain_by_copying_each_rows_cell(tokenizer: PreTrainedTokenizerBase) -> None:
    """A chain followed hop by hop: each task names the previous row's cell, the answer is the last cell; the
    loss is on those copies only, never on the first name (in the question) nor on a row."""
    pw = page_world(0)
    rng = random.Random(5)
    chains = set()
    for _ in range(30):
        sample = samples.hop_sample(rng, tokenizer, pw.train, pw.world)
        question, *lines = tokenizer.decode(sample.input_ids).splitlines()
        tasks = [line for line in lines if line.startswith("Find ")]
        names = [t.partition(". Reply")[0].rpartition(" of ")[2] for t in tasks]
        rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| ")]
        values = [row for row in rows if row[0] not in ("city", "country")]
        assert names[0] in question and len(tasks) in (2, 3)
        assert [row[0] for row in values] == names and [row[1] for row in values][:-1] == names[1:]
        assert lines[-1] == f"Answer: {values[-1][1]}"
        assert [span.strip() for span in _scored_spans(tokenizer, sample)] == [*names[1:], values[-1][1]]
        chains.add(len(tasks))
    assert chains == {2, 3}
    heldout = {e.name for e in (*pw.heldout.countries, *pw.heldout.cities)}
    for sample in samples.heldout_hops(pw, tokenizer, 0, 10):
        question = tokenizer.decode(sample.input_ids).splitlines()[0]
        assert any(name in question for name in heldout)
    assert samples.heldout_hops(pw, tokenizer, 0, 5) == samples.heldout_hops(pw, tokenizer, 0, 5)  # seeded


def test_mixture_follows_the_phases() -> None:
    phases = ((10, (1.0, 0.0, 0.0)), (20, (0.5, 0.5, 0.0)), (30, (0.0, 0.0, 1.0)))
    assert mixture_at(0, phases) == (1.0, 0.0, 0.0)
    assert mixture_at(10, phases) == (0.5, 0.5, 0.0)
    assert mixture_at(29, phases) == (0.0, 0.0, 1.0)
    assert mixture_at(99, phases) == (0.0, 0.0, 1.0)
    assert [until for until, _ in scaled_phases(phases, 60)] == [20, 40, 60]


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": 0}, "steps=0 must be positive"),
        ({"induction_length": 20, "induction_span": 8}, "induction_length=20"),
        ({"phases": ((10, (1.0, 0.0)),)}, "weights (1.0, 0.0)"),
        ({"phases": ((20, (1.0, 0.0, 0.0)), (10, (0.0, 1.0, 0.0)))}, "ordered"),
        ({"task_first": 1.5}, "task_first=1.5 must be a share between 0 and 1"),
        ({"hop_share": -0.1}, "hop_share=-0.1 must be a share between 0 and 1"),
        ({"walk_ends": True}, "walk_ends needs walks"),
    ],
)
def test_bad_specs_name_what_is_wrong(changes: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match="invalid PretrainSpec") as error:
        PretrainSpec(**changes)  # type: ignore[arg-type]
    assert message in str(error.value)


def test_digest_changes_with_the_recipe() -> None:
    assert PretrainSpec().digest() == PretrainSpec().digest()
    assert PretrainSpec().digest() != PretrainSpec(steps=100, phases=scaled_phases(PretrainSpec().phases, 100)).digest()
    assert PretrainSpec().digest() != PretrainSpec(seed=1).digest()


def test_shipped_checkpoint_is_used_only_for_its_recipe_and_intact(tmp_path: Path) -> None:
    spec = PretrainSpec()
    folder = tmp_path / "shipped"
    folder.mkdir()
    (folder / shipped.WEIGHTS_FILE).write_bytes(b"weights")
    marker = {"digest": spec.digest(), "sha256": shipped.weights_sha256(folder)}
    (folder / MARKER_NAME).write_text(json.dumps(marker))
    assert shipped.matches(folder, spec.digest())
    assert not shipped.matches(folder, PretrainSpec(seed=1).digest())  # another recipe
    (folder / shipped.WEIGHTS_FILE).write_bytes(b"tampered")
    assert not shipped.matches(folder, spec.digest())
    shutil.rmtree(folder)
    assert not shipped.matches(folder, spec.digest())


def test_the_package_ships_the_default_recipes_weights() -> None:
    """The default run's first build copies these instead of pretraining (item 5 of issue 12)."""
    folder = shipped.SHIPPED_ROOT / pt.SHIPPED_NAME
    assert pt.shipped_folder(PretrainSpec()) == folder
    assert shipped.matches(folder, PretrainSpec().digest()), (
        "verl_parl_demo/modelbuild/weights/pretrained does not hold the default PretrainSpec's checkpoint: "
        "run `python -m verl_parl_demo.modelbuild pretrain --shallow --rebuild --ship`"
    )
    info = json.loads((folder / MARKER_NAME).read_text())
    assert (folder / shipped.WEIGHTS_FILE).stat().st_size < 20 * 1024 * 1024
    assert info["gates"]["induction"] >= 0.9 and info["gates"]["heldout_lookup"] >= 0.6  # among up to 4 hits


def test_the_package_ships_the_grown_reader() -> None:
    """The research cold start's base: the 2-layer checkpoint grown to 4 layers and trained on."""
    folder = shipped.SHIPPED_ROOT / pt.READER_SHIPPED_NAME
    assert pt.shipped_folder(pt.READER_PRETRAIN) == folder
    assert shipped.matches(folder, pt.READER_PRETRAIN.digest()), (
        "verl_parl_demo/modelbuild/weights/reader does not hold READER_PRETRAIN's checkpoint: "
        "run `python -m verl_parl_demo.modelbuild pretrain --rebuild --ship`"
    )
    info = json.loads((folder / MARKER_NAME).read_text())
    config = json.loads((folder / "config.json").read_text())
    assert config["num_hidden_layers"] == pt.DEEP_READER_MODEL.num_layers
    assert (folder / shipped.WEIGHTS_FILE).stat().st_size < 20 * 1024 * 1024
    assert info["gates"]["induction"] >= 0.9 and info["gates"]["heldout_lookup"] >= 0.65  # 0.68: a fifth are walks
    assert info["gates"]["heldout_walk"] >= 0.6  # the next listed name handed out (0.0 without the walks)
    assert info["gates"]["heldout_hop"] >= 0.9  # a chain's next name copied out of the last row (0.0 without hops)


SMALL_READER = TinyModelSpec(hidden_size=64, num_layers=2, num_heads=1, num_kv_heads=1, intermediate_size=128)


def test_scored_loss_equals_the_full_masked_loss() -> None:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM
    from verl_parl_demo.modelbuild.lm import masked_lm_loss

    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=100,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
    )
    model = Qwen2ForCausalLM(config)
    ids = torch.randint(0, 100, (3, 12))
    mask = (torch.rand(3, 12) < 0.4).float()
    attention = torch.ones_like(ids)
    full = masked_lm_loss(model(input_ids=ids, attention_mask=attention).logits, ids, mask)
    batch = {"input_ids": ids, "attention_mask": attention, "loss_mask": mask}
    assert torch.isclose(pt.scored_loss(model, batch), full, atol=1e-5)


def test_lookup_scores_by_hand() -> None:
    from verl_parl_demo.modelbuild.coldstart_eval import lookup_scores

    call = '<tool_call>\n{"name": "search", "arguments": {"queries": ["hungary"], "k": 1}}\n</tool_call>'
    gold = "| Hungary | HUF | Europe |"
    assert lookup_scores("Hungary", call, "| Hungary | HUF | Asia |", gold) == (True, 2, 1, False)
    assert lookup_scores("Hungary", call, "|hungary| huf |EUROPE|", gold) == (True, 2, 2, True)
    garbled = call.replace("hungary", "Hungry")
    assert lookup_scores("Hungary", garbled, "| Hungary |", gold) == (False, 2, 0, False)
    assert lookup_scores("Hungary", "no call at all", "", gold) == (False, 2, 0, False)
    # a restated header line is not the row; without the header given, the first line is taken as the row
    header = "| country | currency code | continent |"
    restated = f"{header}\n| Hungary | HUF | Europe |"
    assert lookup_scores("Hungary", call, restated, gold, header) == (True, 2, 2, True)
    assert lookup_scores("Hungary", call, restated, gold) == (True, 2, 0, False)
    assert lookup_scores("Hungary", call, header, gold, header) == (True, 2, 0, False)


def test_neighbour_scores_by_hand() -> None:
    from verl_parl_demo.modelbuild.coldstart_eval import neighbour_scores

    call = '<tool_call>\n{"name": "search", "arguments": {"queries": [" niger"], "k": 1}}\n</tool_call>'
    neighbours = ["Nigeria", "Chad", "Mali"]
    sentence = "The neighbouring countries of Niger are Nigeria, Chad and Mali."
    assert neighbour_scores("Niger", neighbours, call, sentence) == (True, 3)
    assert neighbour_scores("Niger", neighbours, call, "nigeria, CHAD") == (True, 2)
    # whole words only: Niger is not a neighbour named in "Nigeria", nor Mali in "Somalia"
    assert neighbour_scores("Chad", ["Niger", "Mali"], call, "Nigeria, Somalia") == (False, 0)
    assert neighbour_scores("Niger", neighbours, "no call at all", "") == (False, 0)


def test_values_are_taken_as_the_page_writes_them() -> None:
    from verl_parl_demo.tasks.research.corpus import as_written

    assert as_written("9768785", "a population of 9,768,785.") == "9,768,785"
    assert as_written("9768785", "a population of 9768785.") == "9768785"
    assert as_written("HUF", "currency code HUF") == "HUF"


def test_assignment_scores_by_hand() -> None:
    from verl_parl_demo.modelbuild.coldstart_eval import assignment_scores

    def assign(prompt: str) -> str:
        call = {"name": "assign_task", "arguments": {"agent": "finder", "prompt": prompt}}
        return f"<tool_call>\n{json.dumps(call)}\n</tool_call>"

    turn = assign("Find the area of Porto.") + assign("Find the area of the city.") + assign("area of ADEN")
    assert assignment_scores(["Porto", "Aden", "Gent"], turn) == (3, 2, 2)
    assert assignment_scores(["Porto"], "no calls at all") == (0, 0, 0)
    assert assignment_scores(["Porto"], assign("Porto") + '<tool_call>\n{"name": "create_subagent"') == (1, 1, 1)
    each = {"name": "assign_each", "arguments": {"agent": "a", "prompt": "Area of {item}?", "items": "Porto; Lyon"}}
    assert assignment_scores(["Porto", "Aden"], f"<tool_call>\n{json.dumps(each)}\n</tool_call>") == (2, 1, 1)


def test_the_package_ships_the_readers_research_cold_start() -> None:
    pytest.importorskip("verl_parl_search")
    from verl_parl_demo.modelbuild.coldstart import default_spec, shipped_name

    spec = default_spec("research", reader=True)
    digest = spec.digest(spec.demos())
    assert shipped.matches(shipped.SHIPPED_ROOT / shipped_name("research"), digest), (
        "verl_parl_demo/modelbuild/weights/coldstart-research does not hold READER_RECIPE's checkpoint: "
        "rebuild it with `python -m verl_parl_demo.modelbuild coldstart --task research --reader --rebuild --ship`"
    )


def test_a_grown_model_computes_what_the_shallow_one_did_and_then_learns(tmp_path: Path) -> None:
    """Growing appends layers that add nothing until trained: same logits (copying kept), then the new
    layers' output projections move on the first step."""
    import torch
    from transformers import AutoModelForCausalLM

    base = build_tiny_model(SMALL_READER, tmp_path, progress=False)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="sdpa")
    ids = torch.randint(3, SMALL_READER.vocab_size, (2, 40))
    with torch.no_grad():
        before = model(input_ids=ids).logits
    grown = pt.grown_model(model, 5)
    assert len(grown.model.layers) == grown.config.num_hidden_layers == 5
    assert [layer.self_attn.layer_idx for layer in grown.model.layers] == [0, 1, 2, 3, 4]
    with torch.no_grad():
        assert torch.allclose(grown(input_ids=ids).logits, before, atol=1e-5)
        cached = grown.generate(ids[:1, :8], max_new_tokens=6, do_sample=False)  # the KV cache has 5 layers
    assert cached.shape == (1, 14)
    loss = grown(input_ids=ids, labels=ids).loss
    loss.backward()
    torch.optim.SGD(grown.parameters(), lr=0.1).step()
    assert grown.model.layers[4].mlp.down_proj.weight.abs().sum() > 0


def test_widened_heads_compute_what_the_narrow_model_did_and_then_learn(tmp_path: Path) -> None:
    """More heads of the same width add nothing until trained (same logits, also through a save and a load,
    and with a KV cache), the old heads keep their weights, and the new heads' output columns move on the
    first step."""
    from transformers import AutoModelForCausalLM

    base = build_tiny_model(SMALL_READER, tmp_path / "cache", progress=False)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32, attn_implementation="sdpa")
    ids = torch.randint(3, SMALL_READER.vocab_size, (2, 40))
    old_q = model.model.layers[1].self_attn.q_proj.weight.detach().clone()
    with torch.no_grad():
        before = model(input_ids=ids).logits
    wide = pt.widened_heads(model, 3, 3)
    attn = wide.model.layers[1].self_attn
    assert attn.q_proj.weight.shape == (3 * 64, 64) and attn.o_proj.weight.shape == (64, 3 * 64)
    assert torch.equal(attn.q_proj.weight[:64], old_q) and attn.o_proj.weight[:, 64:].abs().sum() == 0
    with torch.no_grad():
        assert torch.allclose(wide(input_ids=ids).logits, before, atol=1e-5)
        cached = wide.generate(ids[:1, :8], max_new_tokens=6, do_sample=False)
    assert cached.shape == (1, 14)
    wide.save_pretrained(tmp_path / "wide")
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "wide", dtype=torch.float32, attn_implementation="sdpa")
    with torch.no_grad():
        assert torch.allclose(loaded(input_ids=ids).logits, before, atol=1e-5)
    wide(input_ids=ids, labels=ids).loss.backward()
    torch.optim.SGD(wide.parameters(), lr=0.1).step()
    assert attn.o_proj.weight[:, 64:].abs().sum() > 0


def test_a_recipe_grows_heads_of_the_same_width_only() -> None:
    """``head_dim`` lets more heads than ``hidden_size`` allows at that width; growth keeps the width and the
    query heads per key-value head, and an unset ``head_dim`` leaves older digests alone."""
    start = PretrainSpec(base=SMALL_READER, steps=10, phases=((10, (1.0, 0.0, 0.0)),))
    wider = dataclasses.replace(SMALL_READER, num_layers=3, num_heads=2, num_kv_heads=2, head_dim=64)
    grown = PretrainSpec(base=wider, steps=10, phases=((10, (0.1, 0.2, 0.7)),), grow_from=start)
    assert wider.digest() != dataclasses.replace(wider, head_dim=0).digest()  # 2 heads 64 wide, not 32
    assert SMALL_READER.digest() == dataclasses.replace(SMALL_READER, head_dim=0).digest()
    with pytest.raises(ValueError, match="widths must match"):
        PretrainSpec(base=dataclasses.replace(wider, head_dim=32), grow_from=start)
    with pytest.raises(ValueError, match="widths must match"):  # 3 heads do not divide the 64-wide hidden size
        PretrainSpec(base=dataclasses.replace(wider, num_heads=3, num_kv_heads=3, head_dim=32), grow_from=start)
    with pytest.raises(ValueError, match="as many query heads"):
        PretrainSpec(base=dataclasses.replace(wider, num_kv_heads=1), grow_from=start)
    with pytest.raises(ValueError, match="heads must be at most"):
        PretrainSpec(base=SMALL_READER, grow_from=grown)
    with pytest.raises(ValueError, match="head_dim=-1"):
        dataclasses.replace(SMALL_READER, head_dim=-1)


def test_a_recipe_that_grows_heads_and_layers_saves_a_model_that_computes_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The build grows the start's layers and heads before it trains (training and gates stubbed here): the
    saved checkpoint has the recipe's shape and, untrained, the start's logits."""
    from transformers import AutoModelForCausalLM

    monkeypatch.setattr(pt, "pretrain", lambda model, tokenizer, spec, progress: {})
    monkeypatch.setattr(pt, "evaluate_gates", lambda model, tokenizer, spec: {})
    base = build_tiny_model(SMALL_READER, tmp_path / "cache", progress=False)
    start = PretrainSpec(base=SMALL_READER, steps=10, phases=((10, (1.0, 0.0, 0.0)),))
    wider = dataclasses.replace(SMALL_READER, num_layers=3, num_heads=2, num_kv_heads=2, head_dim=64)
    pt._train_into(tmp_path / "grown", base, PretrainSpec(base=wider, grow_from=start), progress=False)
    ids = torch.randint(3, SMALL_READER.vocab_size, (2, 30))
    before, after = (
        AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, attn_implementation="sdpa")
        for path in (base, tmp_path / "grown")
    )
    config = after.config
    assert (config.num_hidden_layers, config.num_attention_heads, config.head_dim) == (3, 2, 64)
    with torch.no_grad():
        assert torch.allclose(after(input_ids=ids).logits, before(input_ids=ids).logits, atol=1e-5)


def test_a_stream_draws_other_samples_from_the_same_split(tokenizer: PreTrainedTokenizerBase) -> None:
    """A continuing stage (``stream``) draws samples its start did not, from the same split of entities."""
    spec = PretrainSpec(base=SMALL, steps=10, phases=((10, (0.0, 0.0, 1.0)),), row_share=0.5)
    first, other = (pt.Curriculum(dataclasses.replace(spec, stream=s), tokenizer) for s in (0, 1))
    again = pt.Curriculum(spec, tokenizer)
    drawn = [[c.sample("pages").input_ids for _ in range(8)] for c in (first, other, again)]
    assert drawn[0] == drawn[2] and all(a != b for a, b in zip(drawn[0], drawn[1], strict=True))
    assert first._pages is other._pages  # page_world(seed): one split of training and held-out entities


def test_a_grown_recipe_names_its_start_in_its_digest() -> None:
    deeper = dataclasses.replace(SMALL_READER, num_layers=3)
    start = PretrainSpec(base=SMALL_READER, steps=10, phases=((10, (1.0, 0.0, 0.0)),))
    grown = PretrainSpec(base=deeper, steps=10, phases=((10, (0.1, 0.2, 0.7)),), grow_from=start)
    assert grown.digest() != dataclasses.replace(grown, grow_from=dataclasses.replace(start, seed=1)).digest()
    with pytest.raises(ValueError, match="num_layers and heads only"):
        PretrainSpec(base=dataclasses.replace(deeper, hidden_size=128), grow_from=start)
    with pytest.raises(ValueError, match="must be at most"):
        PretrainSpec(base=SMALL_READER, grow_from=grown)
    continued = PretrainSpec(base=deeper, steps=10, phases=((10, (0.1, 0.2, 0.7)),), grow_from=grown, stream=1)
    assert continued.digest() != dataclasses.replace(continued, stream=2).digest()  # another stage, other samples
    assert grown.digest() == dataclasses.replace(grown, stream=0).digest()


# ------------------------------------------------------------------------------------------ list copies


def _context_and_copy(tokenizer: PreTrainedTokenizerBase, sample: pt.Sample) -> tuple[str, str]:
    """The sample's text before its scored tokens and the scored text (which must be one run at the end)."""
    first = sample.loss_mask.index(1)
    assert all(sample.loss_mask[first:]) and not any(sample.loss_mask[:first])
    return tokenizer.decode(sample.input_ids[:first]), tokenizer.decode(sample.input_ids[first:])


def test_a_list_sample_copies_the_questions_list_whole_after_a_cue(tokenizer: PreTrainedTokenizerBase) -> None:
    pw = page_world(0)
    cues = set()
    for seed in range(30):
        sample = list_sample(random.Random(seed), tokenizer, pw.train)
        context, copy = _context_and_copy(tokenizer, sample)
        question, cue = context.rsplit("\n", 1)
        listed = question.split(": ", 1)[1].split(". Answer with")[0].split("; ")
        end = dict(LIST_CUES)[cue]
        assert 2 <= len(listed) <= 6
        assert copy == " " + "; ".join(listed) + end  # the space before the first name, every name, the end
        cues.add(cue)
    assert cues == {cue for cue, _ in LIST_CUES}
    assert list_sample(random.Random(9), tokenizer, pw.train) == list_sample(random.Random(9), tokenizer, pw.train)


def test_list_samples_name_only_their_pools_entities_or_made_up_names(tokenizer: PreTrainedTokenizerBase) -> None:
    """Training lists never name a held-out entity (the gate's lists are drawn from the held-out pool)."""
    pw = page_world(0)
    train = {e.name for e in (*pw.train.countries, *pw.train.cities)}
    heldout = {e.name for e in (*pw.heldout.countries, *pw.heldout.cities)} - train  # some city names recur
    named = made_up = 0
    for seed in range(60):
        _, copy = _context_and_copy(tokenizer, list_sample(random.Random(seed), tokenizer, pw.train))
        for name in copy.strip().rstrip('"}').split("; "):
            assert name not in heldout
            named, made_up = named + (name in train), made_up + (name not in train)
    assert named > 2 * made_up > 0  # a third of the names are made up, so only a copy can write them


def test_the_curriculum_draws_list_copies_at_their_share(tokenizer: PreTrainedTokenizerBase) -> None:
    spec = dataclasses.replace(pt.PretrainSpec(), list_share=0.5, phases=((10, (0.0, 0.0, 1.0)),), steps=10)
    curriculum = pt.Curriculum(spec, tokenizer)
    sources = [curriculum.sample("pages").source for _ in range(60)]
    assert 15 < sources.count("list") < 45 and "pages" in sources
    off = pt.Curriculum(dataclasses.replace(spec, list_share=0.0), tokenizer)
    assert "list" not in {off.sample("pages").source for _ in range(30)}


def test_list_share_is_checked_and_left_out_of_digests_when_off() -> None:
    with pytest.raises(ValueError, match=r"list_share=1\.5 must be a share between 0 and 1"):
        dataclasses.replace(pt.PretrainSpec(), list_share=1.5)
    spec = pt.READER_PRETRAIN
    assert dataclasses.replace(spec, list_share=0.0).digest() == spec.digest()  # shipped checkpoints still match
    assert dataclasses.replace(spec, list_share=0.2).digest() != spec.digest()
