"""Tests of the continuous-batching CPU engine on a tiny random Qwen2 (no download)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Sequence
from dataclasses import replace

import pytest
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from verl_parl.chat.loops import LoopStop, loop_end
from verl_parl.cpu.engine import BatchedGenerator, GenerationResult, SamplingParams

VOCAB = 512
PROMPT_LENGTHS = (1, 3, 5, 8, 13, 17, 21, 30, 34, 40, 55, 64)
GREEDY = SamplingParams(max_tokens=16, temperature=0.0, logprobs=True)


def make_model(attn: str = "sdpa", seed: int = 0) -> Qwen2ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=4096,
        attn_implementation=attn,
    )
    return Qwen2ForCausalLM(config).eval()


@pytest.fixture(scope="module")
def model() -> Qwen2ForCausalLM:
    return make_model()


def make_prompts(lengths: Sequence[int] = PROMPT_LENGTHS, seed: int = 1) -> list[list[int]]:
    generator = torch.Generator().manual_seed(seed)
    return [torch.randint(0, VOCAB, (n,), generator=generator).tolist() for n in lengths]


def varied_greedy(n: int) -> list[SamplingParams]:
    """Greedy params whose max_tokens differ, so rows leave the batch at different steps."""
    return [SamplingParams(max_tokens=8 + 3 * (i % 5), temperature=0.0, logprobs=True) for i in range(n)]


async def run_all(
    model: Qwen2ForCausalLM,
    prompts: list[list[int]],
    params: Sequence[SamplingParams],
    *,
    max_batch_size: int = 64,
    eos: Sequence[int] = (),
    **kwargs: int,
) -> list[GenerationResult]:
    engine = BatchedGenerator(model, eos_token_ids=eos, max_batch_size=max_batch_size, **kwargs)
    try:
        return list(await asyncio.gather(*(engine.generate(p, sp) for p, sp in zip(prompts, params, strict=True))))
    finally:
        await engine.close()


def reference_logprobs(
    model: Qwen2ForCausalLM, prompt: list[int], tokens: list[int], temperature: float = 1.0
) -> torch.Tensor:
    """What a trainer computes: one forward over prompt + response, log_softmax(logits / T) of the response."""
    with torch.inference_mode():
        logits = model(input_ids=torch.tensor([prompt + tokens])).logits[0, len(prompt) - 1 : -1]
    return torch.log_softmax(logits / temperature, dim=-1).gather(1, torch.tensor(tokens).unsqueeze(1)).squeeze(1)


def assert_same(batched: list[GenerationResult], sequential: list[GenerationResult]) -> None:
    for b, s in zip(batched, sequential, strict=True):
        assert b.token_ids == s.token_ids
        assert b.finish_reason == s.finish_reason
        torch.testing.assert_close(torch.tensor(b.log_probs), torch.tensor(s.log_probs), atol=1e-5, rtol=0)


async def wait_for_decode_steps(engine: BatchedGenerator, steps: int) -> None:
    for _ in range(2000):
        if engine.stats.decode_steps >= steps:
            return
        await asyncio.sleep(0.002)
    raise AssertionError("the engine did not start decoding")


# ---------------------------------------------------------------------------------------------------- correctness


@pytest.mark.parametrize("attn", ["sdpa", "eager"])
async def test_batched_equals_one_at_a_time_greedy(attn: str, model: Qwen2ForCausalLM) -> None:
    model = model if attn == "sdpa" else make_model("eager")
    prompts, params = make_prompts(), varied_greedy(len(PROMPT_LENGTHS))
    sequential = await run_all(model, prompts, params, max_batch_size=1)
    engine = BatchedGenerator(model, eos_token_ids=[], max_batch_size=64)
    batched = await asyncio.gather(*(engine.generate(p, sp) for p, sp in zip(prompts, params, strict=True)))
    stats = engine.stats
    await engine.close()
    assert_same(batched, sequential)
    assert [len(r.token_ids) for r in batched] == [sp.max_tokens for sp in params]
    assert all(r.finish_reason == "length" for r in batched)
    assert stats.requests == 12 and stats.prefill_steps <= 2 and stats.mean_batch_size > 6
    assert stats.generated_tokens == sum(sp.max_tokens for sp in params)


async def test_matches_hf_generate_and_trainer_logprobs(model: Qwen2ForCausalLM) -> None:
    prompt = make_prompts([11])[0]
    (result,) = await run_all(model, [prompt], [SamplingParams(max_tokens=20, temperature=0.0, logprobs=True)])
    with torch.inference_mode():
        hf = model.generate(
            torch.tensor([prompt]), max_new_tokens=20, do_sample=False, eos_token_id=None, pad_token_id=0
        )
    assert result.token_ids == hf[0, len(prompt) :].tolist()
    expected = reference_logprobs(model, prompt, result.token_ids)
    torch.testing.assert_close(torch.tensor(result.log_probs), expected, atol=1e-5, rtol=0)


async def test_sampled_logprobs_are_temperature_scaled_before_filtering(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([4, 9, 20])
    params = [
        SamplingParams(max_tokens=12, temperature=0.7, logprobs=True, seed=1),
        SamplingParams(max_tokens=12, temperature=1.3, top_p=0.5, logprobs=True, seed=2),
        SamplingParams(max_tokens=12, temperature=0.9, top_k=5, logprobs=True, seed=3),
    ]
    results = await run_all(model, prompts, params)
    for prompt, sp, result in zip(prompts, params, results, strict=True):
        expected = reference_logprobs(model, prompt, result.token_ids, sp.temperature)
        torch.testing.assert_close(torch.tensor(result.log_probs), expected, atol=1e-5, rtol=0)


async def test_late_joiners_match_sequential(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts()
    params = [SamplingParams(max_tokens=24 if i < 4 else 10 + i, temperature=0.0, logprobs=True) for i in range(12)]
    sequential = await run_all(model, prompts, params, max_batch_size=1)
    engine = BatchedGenerator(model, eos_token_ids=[], max_batch_size=64)
    first = [asyncio.ensure_future(engine.generate(p, sp)) for p, sp in zip(prompts[:4], params[:4], strict=True)]
    await wait_for_decode_steps(engine, 3)
    second = [asyncio.ensure_future(engine.generate(p, sp)) for p, sp in zip(prompts[4:8], params[4:8], strict=True)]
    await wait_for_decode_steps(engine, 8)
    third = [asyncio.ensure_future(engine.generate(p, sp)) for p, sp in zip(prompts[8:], params[8:], strict=True)]
    batched = await asyncio.gather(*first, *second, *third)
    stats = engine.stats
    await engine.close()
    assert_same(batched, sequential)
    assert stats.prefill_steps >= 3 and stats.mean_batch_size > 1


async def test_queueing_beyond_max_batch_size(model: Qwen2ForCausalLM) -> None:
    prompts, params = make_prompts(), varied_greedy(len(PROMPT_LENGTHS))
    sequential = await run_all(model, prompts, params, max_batch_size=1)
    engine = BatchedGenerator(model, eos_token_ids=[], max_batch_size=5)
    batched = await asyncio.gather(*(engine.generate(p, sp) for p, sp in zip(prompts, params, strict=True)))
    stats = engine.stats
    await engine.close()
    assert_same(batched, sequential)
    assert 1 < stats.mean_batch_size <= 5


async def test_prefill_is_split_by_length_and_budget(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([150, 3, 4, 5, 6, 7, 8, 30, 31, 33])
    params = [GREEDY] * len(prompts)
    sequential = await run_all(model, prompts, params, max_batch_size=1)
    engine = BatchedGenerator(model, eos_token_ids=[], max_prefill_tokens=64)
    batched = await asyncio.gather(*(engine.generate(p, sp) for p, sp in zip(prompts, params, strict=True)))
    stats = engine.stats
    await engine.close()
    assert_same(batched, sequential)
    assert stats.prefill_steps >= 4 and stats.mean_batch_size > 8  # several prefills, one decode batch


# ---------------------------------------------------------------------------------------------------- finishing


async def test_stop_token_ids_and_eos_stop_a_row(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([6, 15])
    free = await run_all(model, prompts, [GREEDY, GREEDY])
    stop = free[0].token_ids[4]
    cut = free[0].token_ids.index(stop) + 1
    stopped, untouched = await run_all(
        model, prompts, [SamplingParams(max_tokens=16, temperature=0.0, stop_token_ids=(stop,)), GREEDY]
    )
    assert stopped.token_ids == free[0].token_ids[:cut] and stopped.finish_reason == "stop"
    assert stopped.log_probs is None
    if stop not in free[1].token_ids:
        assert untouched.token_ids == free[1].token_ids and untouched.finish_reason == "length"
    (by_eos,) = await run_all(model, prompts[:1], [GREEDY], eos=[stop])
    assert by_eos.token_ids == free[0].token_ids[:cut] and by_eos.finish_reason == "stop"
    assert len(by_eos.log_probs) == cut


async def test_stop_loops_ends_a_row_where_loop_end_cuts_it(model: Qwen2ForCausalLM) -> None:
    """Rows with different rules (and one without) in one batch: each stops exactly at ``loop_end`` of what it
    generates freely, with finish reason "loop" and the log-probs of its tokens; the others are untouched."""
    prompts = make_prompts()
    plain = SamplingParams(max_tokens=120, temperature=0.0, logprobs=True)
    free = await run_all(model, prompts, [plain] * len(prompts))
    rules = [LoopStop(repeats=3, min_tokens=4, max_period=4 + i % 3) if i % 4 else None for i in range(len(prompts))]
    params = [replace(plain, stop_loops=r) for r in rules]
    stopped = await run_all(model, prompts, params, max_batch_size=5)  # rows join a running batch
    cuts = 0
    for rule, f, s in zip(rules, free, stopped, strict=True):
        end = loop_end(f.token_ids, rule) if rule is not None else None
        if end is None:
            assert s.token_ids == f.token_ids and s.finish_reason == "length"
        else:
            cuts += 1
            assert s.token_ids == f.token_ids[:end] and s.finish_reason == "loop"
        kept = torch.tensor(f.log_probs[: len(s.token_ids)])
        torch.testing.assert_close(torch.tensor(s.log_probs), kept, atol=1e-5, rtol=0)
    assert cuts >= 3  # the random model loops under greedy decoding


async def test_max_tokens_and_max_model_len_finish_with_length(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([15, 3])
    params = [SamplingParams(max_tokens=100, temperature=0.0), SamplingParams(max_tokens=4, temperature=0.0)]
    capped, short = await run_all(model, prompts, params, max_model_len=20)
    assert len(capped.token_ids) == 5 and capped.finish_reason == "length"
    assert len(short.token_ids) == 4 and short.finish_reason == "length"


async def test_invalid_prompts_raise_clear_errors(model: Qwen2ForCausalLM) -> None:
    engine = BatchedGenerator(model, eos_token_ids=[], max_model_len=20)
    try:
        with pytest.raises(ValueError, match=r"prompt has 20 tokens but max_model_len is 20"):
            await engine.generate([1] * 20, GREEDY)
        with pytest.raises(ValueError, match="max_model_len"):
            await engine.generate([1] * 50, GREEDY)
        with pytest.raises(ValueError, match="empty"):
            await engine.generate([], GREEDY)
        with pytest.raises(ValueError, match="vocabulary"):
            await engine.generate([VOCAB], GREEDY)
        result = await engine.generate([1] * 19, GREEDY)  # the engine still works
        assert len(result.token_ids) == 1 and result.finish_reason == "length"
    finally:
        await engine.close()


def test_sampling_params_validation() -> None:
    with pytest.raises(ValueError, match="max_tokens"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(max_tokens=1, top_p=0.0)
    with pytest.raises(ValueError, match="temperature"):
        SamplingParams(max_tokens=1, temperature=-1.0)
    assert SamplingParams(max_tokens=1, stop_token_ids=[3, 4]).stop_token_ids == (3, 4)  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------------- sampling


async def test_top_k_1_equals_greedy(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([5, 12, 30])
    greedy = await run_all(model, prompts, [GREEDY] * 3)
    top1 = [SamplingParams(max_tokens=16, temperature=1.0, top_k=1, logprobs=True)] * 3
    sampled = await run_all(model, prompts, top1)
    assert [r.token_ids for r in sampled] == [r.token_ids for r in greedy]


async def test_seeded_sampling_is_reproducible(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([7, 3, 25, 40])
    seeded = SamplingParams(max_tokens=16, temperature=1.0, top_p=0.9, seed=1234)
    alone = await run_all(model, prompts[:1], [seeded])
    other = SamplingParams(max_tokens=10, temperature=1.0)
    in_batch = await run_all(model, prompts, [seeded, other, GREEDY, other], seed=99)
    again = await run_all(model, prompts[:1], [seeded], max_batch_size=1, seed=7)
    assert alone[0].token_ids == in_batch[0].token_ids == again[0].token_ids
    different = await run_all(model, prompts[:1], [SamplingParams(max_tokens=16, temperature=1.0, seed=4321)])
    assert different[0].token_ids != alone[0].token_ids


async def test_top_k_and_top_p_sample_inside_the_kept_set(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([5, 9, 17, 33])
    params = [
        SamplingParams(max_tokens=20, temperature=1.0, top_k=3, seed=1),
        SamplingParams(max_tokens=20, temperature=0.8, top_p=0.3, seed=2),
        SamplingParams(max_tokens=20, temperature=1.5, top_k=50, top_p=0.6, seed=3),
        SamplingParams(max_tokens=20, temperature=1.0),
    ]
    results = await run_all(model, prompts, params)
    for prompt, sp, result in zip(prompts, params, results, strict=True):
        assert len(result.token_ids) == 20 and all(0 <= t < VOCAB for t in result.token_ids)
        with torch.inference_mode():
            logits = model(input_ids=torch.tensor([prompt + result.token_ids])).logits[0, len(prompt) - 1 : -1]
        probs = torch.softmax(logits / sp.temperature, dim=-1)
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        for step, token in enumerate(result.token_ids):
            rank = int((order[step] == token).nonzero())
            if sp.top_k > 0:
                assert rank < sp.top_k
            if sp.top_p < 1.0:
                kept = sorted_probs[step, : min(sp.top_k, VOCAB) if sp.top_k > 0 else VOCAB]
                mass_before = float(kept[:rank].sum() / kept.sum())
                assert mass_before < sp.top_p + 1e-6


# ---------------------------------------------------------------------------------------------------- control


async def test_update_weights_changes_outputs_and_rejects_unknown_names() -> None:
    model, twin = make_model(seed=3), make_model(seed=3)
    prompt = make_prompts([9])[0]
    engine = BatchedGenerator(model, eos_token_ids=[])
    try:
        before = await engine.generate(prompt, GREEDY)
        generator = torch.Generator().manual_seed(5)
        perturbed = {
            n: p.detach() + 0.1 * torch.randn(p.shape, generator=generator) for n, p in twin.named_parameters()
        }
        with pytest.raises(ValueError, match=r"model\.not_a_layer\.weight"):
            await engine.update_weights([("model.not_a_layer.weight", torch.zeros(1)), *perturbed.items()])
        with pytest.raises(ValueError, match="shape mismatch"):
            await engine.update_weights([("lm_head.weight", torch.zeros(3, 3))])
        assert (await engine.generate(prompt, GREEDY)).token_ids == before.token_ids  # nothing was loaded
        assert await engine.update_weights(iter(perturbed.items())) == len(perturbed)
        after = await engine.generate(prompt, GREEDY)
    finally:
        await engine.close()
    with torch.no_grad():
        for name, param in twin.named_parameters():
            param.copy_(perturbed[name])
    assert after.log_probs != before.log_probs
    torch.testing.assert_close(
        torch.tensor(after.log_probs), reference_logprobs(twin, prompt, after.token_ids), atol=1e-5, rtol=0
    )
    assert engine.stats.weight_updates == 1


async def test_abort_all_returns_partial_results(model: Qwen2ForCausalLM) -> None:
    engine = BatchedGenerator(model, eos_token_ids=[], max_batch_size=2)
    long = SamplingParams(max_tokens=3000, temperature=1.0, logprobs=True)
    tasks = [asyncio.ensure_future(engine.generate(p, long)) for p in make_prompts([4, 6, 8, 10])]
    await wait_for_decode_steps(engine, 5)
    assert await engine.abort_all() == 4  # two running, two queued
    results = await asyncio.gather(*tasks)
    assert [r.finish_reason for r in results] == ["aborted"] * 4
    assert all(len(r.token_ids) >= 5 for r in results[:2])  # were running
    assert all(r.token_ids == [] for r in results[2:])  # were still queued
    assert all(len(r.log_probs) == len(r.token_ids) for r in results)
    after = await engine.generate([1, 2, 3], GREEDY)  # the engine keeps serving
    assert after.finish_reason == "length"
    await engine.close()


async def test_cancelled_request_leaves_the_batch(model: Qwen2ForCausalLM) -> None:
    prompts = make_prompts([5, 7])
    (expected,) = await run_all(model, prompts[1:], [GREEDY])
    engine = BatchedGenerator(model, eos_token_ids=[])
    doomed = asyncio.ensure_future(engine.generate(prompts[0], SamplingParams(max_tokens=3000, temperature=0.0)))
    kept = asyncio.ensure_future(engine.generate(prompts[1], GREEDY))
    await wait_for_decode_steps(engine, 3)
    doomed.cancel()
    result = await kept
    await asyncio.sleep(0.05)
    stats = engine.stats
    await engine.close()
    assert result.token_ids == expected.token_ids
    assert stats.requests == 2 and stats.decode_steps < 100  # the cancelled row stopped decoding


async def test_event_loop_stays_responsive_while_decoding(model: Qwen2ForCausalLM) -> None:
    engine = BatchedGenerator(model, eos_token_ids=[])
    params = SamplingParams(max_tokens=150, temperature=1.0)
    work = asyncio.ensure_future(asyncio.gather(*(engine.generate(p, params) for p in make_prompts())))
    loop = asyncio.get_running_loop()
    gaps, last = [], loop.time()
    while not work.done():
        await asyncio.sleep(0.001)
        gaps.append(loop.time() - last)
        last = loop.time()
    await work
    await engine.close()
    assert len(gaps) > 10 and max(gaps) < 1.0  # the model runs on the worker thread, not on the event loop


async def test_close_aborts_in_flight_and_leaves_no_threads_or_tasks(model: Qwen2ForCausalLM) -> None:
    engine = BatchedGenerator(model, eos_token_ids=[])
    thread = engine._thread
    pending = asyncio.ensure_future(engine.generate([1, 2, 3], SamplingParams(max_tokens=3000, temperature=0.0)))
    await wait_for_decode_steps(engine, 2)
    await engine.close()
    result = await pending
    assert result.finish_reason == "aborted" and len(result.token_ids) >= 2
    assert not thread.is_alive() and thread not in threading.enumerate()
    assert asyncio.all_tasks() == {asyncio.current_task()}
    with pytest.raises(RuntimeError, match="closed"):
        await engine.generate([1, 2, 3], GREEDY)
    await engine.close()  # idempotent
