"""Pretraining's list copies: a task's list written out whole after a cue, the loss on the copy only."""

from __future__ import annotations

import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

import dataclasses
import random

import pytest
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from verl_parl.models import pretrain as pt
from verl_parl.models.samples import LIST_CUES, list_sample, page_world
from verl_parl.models.tiny import TinyModelSpec, build_tiny_model

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


def _split(tokenizer: PreTrainedTokenizerBase, sample: pt.Sample) -> tuple[str, str]:
    """The sample's text before its scored tokens and the scored text (which must be one run at the end)."""
    first = sample.loss_mask.index(1)
    assert all(sample.loss_mask[first:]) and not any(sample.loss_mask[:first])
    return tokenizer.decode(sample.input_ids[:first]), tokenizer.decode(sample.input_ids[first:])


def test_a_list_sample_copies_the_questions_list_whole_after_a_cue(tokenizer: PreTrainedTokenizerBase) -> None:
    pw = page_world(0)
    cues = set()
    for seed in range(30):
        sample = list_sample(random.Random(seed), tokenizer, pw.train)
        context, copy = _split(tokenizer, sample)
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
        _, copy = _split(tokenizer, list_sample(random.Random(seed), tokenizer, pw.train))
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
