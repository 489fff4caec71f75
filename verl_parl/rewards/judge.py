"""An LLM judge with a cache and a concurrency limit; every failure is an :class:`InfraFailureError`
naming its cause, never a silent 0.

Two backends (``parl.reward.judge.backend``, built by :func:`build_judge`): ``external``, an
OpenAI-compatible ``/chat/completions`` endpoint, and ``frozen``, the frozen-subagent group's servers
(named Ray actors ``parl_frozen_<i>``, found by name) with the chat template of the frozen
checkpoint's tokenizer applied. ``$VERL_PARL_JUDGE_BASE_URL`` / ``$VERL_PARL_JUDGE_MODEL`` override the
configured backend with an external endpoint.

What judged Kimi-Researcher's *training* reward is not published (o3-mini was its evaluation judge),
so the endpoint, model and prompt are configuration. The judge answers with a verdict line
``VERDICT: CORRECT`` / ``VERDICT: INCORRECT`` (or a bare ``SCORE: 0.7``); anything else is
"nonsense" and marks the sample infra-failed.

Thread-safe and synchronous on purpose: verl's reward managers call score functions from executor
threads, so a threading semaphore bounds the requests of all of them together.
"""

from __future__ import annotations

import hashlib
import inspect
import itertools
import os
import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from uuid import uuid4

from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.settings import TEMPLATES, JudgeSettings
from verl_parl.rewards.table import CellJudge
from verl_parl.rewards.text_match import extract_answer
from verl_parl.settings.defaults import IN_YAML, yaml_defaults

_VERDICT = re.compile(r"VERDICT:\s*(CORRECT|INCORRECT)\b", re.IGNORECASE)
_SCORE = re.compile(r"SCORE:\s*([01](?:\.\d+)?)\b", re.IGNORECASE)


@dataclass(frozen=True)
@yaml_defaults("reward.judge")
class JudgeConfig:
    """Where and how to judge. ``base_url`` is e.g. ``http://127.0.0.1:8000/v1``; None when the judge
    is given its own transport (``LLMJudge(config, ask=...)``, e.g. the frozen group)."""

    base_url: str | None
    model: str
    template: str = IN_YAML
    timeout_s: float = IN_YAML
    concurrency: int = IN_YAML
    cache: int = IN_YAML
    api_key_env: str = IN_YAML
    max_tokens: int = IN_YAML

    def __post_init__(self) -> None:
        errors = []
        if self.base_url is not None and not self.base_url.startswith(("http://", "https://")):
            errors.append(f"judge.base_url: must be an http(s) URL, got {self.base_url!r}")
        if self.template not in TEMPLATES:
            errors.append(f"judge.template: {self.template!r} is not one of {sorted(TEMPLATES)}")
        if self.concurrency < 1:
            errors.append(f"judge.concurrency: must be >= 1, got {self.concurrency}")
        if self.timeout_s <= 0:
            errors.append(f"judge.timeout_s: must be positive, got {self.timeout_s}")
        if errors:
            raise ValueError("; ".join(errors))


def parse_verdict(text: str) -> float:
    """``VERDICT: CORRECT`` → 1.0, ``INCORRECT`` → 0.0, ``SCORE: 0.7`` → 0.7 (last one wins).

    Raises:
        InfraFailureError: the reply holds no verdict (the judge, not the policy, failed).
    """
    verdicts = _VERDICT.findall(text)
    if verdicts:
        return 1.0 if verdicts[-1].upper() == "CORRECT" else 0.0
    scores = _SCORE.findall(text)
    if scores and 0.0 <= float(scores[-1]) <= 1.0:
        return float(scores[-1])
    raise InfraFailureError(f"judge reply has no verdict: {text[:200]!r}")


def render_prompt(template: str, question: str, answer: str, gold: str) -> str:
    """The judge prompt for one sample."""
    return TEMPLATES[template].format(question=question, answer=answer, gold=gold)


Ask = Callable[[str], str]
"""Sends one judge prompt, returns the reply text; raises :class:`InfraFailureError` on failure."""


class LLMJudge:
    """Asks at most ``concurrency`` at a time; caches verdicts by prompt (LRU).

    ``ask`` sends a prompt (default: POST to ``config.base_url``'s ``/chat/completions``)."""

    def __init__(self, config: JudgeConfig, ask: Ask | None = None) -> None:
        if ask is None and not config.base_url:
            raise ValueError("judge.base_url: required for an OpenAI-compatible judge")
        self.config = config
        self._ask = ask or self._post
        self._slots = threading.BoundedSemaphore(config.concurrency)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, float] = OrderedDict()
        self.requests_sent = 0
        self.cache_hits = 0

    def _cached(self, key: str) -> float | None:
        with self._lock:
            if key in self._cache:
                self._cache.move_to_end(key)
                self.cache_hits += 1
                return self._cache[key]
        return None

    def _store(self, key: str, value: float) -> None:
        with self._lock:
            self._cache[key] = value
            while len(self._cache) > self.config.cache:
                self._cache.popitem(last=False)

    def _post(self, prompt: str) -> str:
        import requests

        headers = {"Content-Type": "application/json"}
        api_key = os.environ.get(self.config.api_key_env)
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        payload: dict[str, Any] = {
            "model": self.config.model,
            "messages": [{"role": "user", "content": prompt}],
            "temperature": 0.0,
            "max_tokens": self.config.max_tokens,
        }
        url = str(self.config.base_url).rstrip("/") + "/chat/completions"
        try:
            response = requests.post(url, json=payload, headers=headers, timeout=self.config.timeout_s)
            response.raise_for_status()
            return str(response.json()["choices"][0]["message"]["content"])
        except (requests.RequestException, ValueError, KeyError, IndexError, TypeError) as exc:
            raise InfraFailureError(f"judge request to {url} failed: {type(exc).__name__}: {exc}") from exc

    def judge(self, question: str, answer: str, gold: str) -> float:
        """Score in [0, 1]; raises :class:`InfraFailureError` when the endpoint fails or talks nonsense."""
        prompt = render_prompt(self.config.template, question, answer, gold)
        key = hashlib.sha256(f"{self.config.model}\0{prompt}".encode()).hexdigest()
        cached = self._cached(key)
        if cached is not None:
            return cached
        with self._slots:
            with self._lock:
                self.requests_sent += 1
            reply = self._ask(prompt)
        value = parse_verdict(reply)
        self._store(key, value)
        return value


JUDGE_URL_ENV = "VERL_PARL_JUDGE_BASE_URL"
JUDGE_MODEL_ENV = "VERL_PARL_JUDGE_MODEL"
_JUDGES: dict[tuple[str, str], LLMJudge] = {}
_JUDGES_LOCK = threading.Lock()


def judge_from_env() -> LLMJudge:
    """The process's judge for ``$VERL_PARL_JUDGE_BASE_URL`` / ``$VERL_PARL_JUDGE_MODEL`` (shared cache)."""
    url, model = os.environ.get(JUDGE_URL_ENV), os.environ.get(JUDGE_MODEL_ENV)
    if not url or not model:
        raise InfraFailureError(f"llm_judge scorer needs ${JUDGE_URL_ENV} and ${JUDGE_MODEL_ENV}")
    with _JUDGES_LOCK:
        if (url, model) not in _JUDGES:
            _JUDGES[(url, model)] = LLMJudge(JudgeConfig(base_url=url, model=model))
        return _JUDGES[(url, model)]


def llm_judge_scorer(
    solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None, judge: LLMJudge | None = None
) -> dict[str, Any]:
    """Registered scorer ``llm_judge``: the judge's verdict on the final answer (question from
    ``extra_info["question"]``). ``judge`` is the run's (``parl.reward.judge``, handed over by the
    ``parl`` reward manager), else the environment's. Raises :class:`InfraFailureError` when the judge fails."""
    question = str((extra_info or {}).get("question", ""))
    score = (judge or judge_from_env()).judge(question, extract_answer(solution_str), str(ground_truth))
    return {"score": score, "acc": float(score >= 0.5)}


class FrozenGroupAsk:
    """Sends judge prompts to the frozen group's servers, round-robin, greedy.

    The prompt is one user message rendered with the chat template of the frozen checkpoint's tokenizer
    (``serving.model_path``). The servers are the named actors ``parl_frozen_<i>``, found by name (and
    started from ``serving`` if none runs yet, as agent-loop workers do). A server error, a timeout or a
    prompt too long for the server's ``max_model_len`` raises :class:`InfraFailureError`.

    Args:
        serving: the dedicated group's settings (``verl_parl.swarm.settings.SubagentServing``).
        max_tokens: the judge's reply budget.
        timeout_s: seconds to wait for one reply.
    """

    def __init__(self, serving: Any, *, max_tokens: int, timeout_s: float) -> None:
        from transformers import AutoTokenizer

        if serving.mode != "dedicated" or not serving.model_path:
            raise ValueError("parl.reward.judge.backend=frozen needs parl.subagent.mode=dedicated with a model_path")
        self.serving = serving
        self.tokenizer = AutoTokenizer.from_pretrained(serving.model_path, local_files_only=True)
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self._handles: list[Any] | None = None
        self._turn = itertools.count()
        self._lock = threading.Lock()

    def prompt_ids(self, prompt: str) -> list[int]:
        """``prompt`` as one user message with the generation prompt, in the frozen tokenizer's chat template."""
        ids = self.tokenizer.apply_chat_template(
            [{"role": "user", "content": prompt}], add_generation_prompt=True, tokenize=True
        )
        if hasattr(ids, "keys"):  # transformers 5 may return a mapping
            ids = ids["input_ids"]
        return [int(i) for i in ids]

    def _next_server(self) -> Any:
        from verl_parl.swarm.frozen import dedicated_handles

        with self._lock:
            if self._handles is None:
                self._handles = dedicated_handles(self.serving)
            return self._handles[next(self._turn) % len(self._handles)]

    def __call__(self, prompt: str) -> str:
        import ray

        prompt_ids = self.prompt_ids(prompt)
        params = {"temperature": 0.0, "max_tokens": self.max_tokens}
        try:
            server = self._next_server()
            ref = server.generate.remote(prompt_ids=prompt_ids, sampling_params=params, request_id=uuid4().hex)
            output = ray.get(ref, timeout=self.timeout_s)
        except (ray.exceptions.RayError, ValueError) as exc:
            raise InfraFailureError(f"frozen-group judge failed: {type(exc).__name__}: {exc}") from exc
        return str(self.tokenizer.decode(output.token_ids, skip_special_tokens=True))


def build_judge(settings: JudgeSettings, trainer_config: Any = None) -> LLMJudge | None:
    """The run's judge from ``parl.reward.judge`` (None with ``backend: none``).

    ``$VERL_PARL_JUDGE_BASE_URL`` and ``$VERL_PARL_JUDGE_MODEL``, when both set, override the backend
    with that OpenAI-compatible endpoint. ``frozen`` reads the group from ``trainer_config``'s
    ``parl.subagent`` section.
    """
    url, model = os.environ.get(JUDGE_URL_ENV), os.environ.get(JUDGE_MODEL_ENV)
    backend = "external" if url and model else settings.backend
    if backend == "none":
        return None
    common: dict[str, Any] = {
        "template": settings.template,
        "timeout_s": settings.timeout_s,
        "concurrency": settings.concurrency,
        "cache": settings.cache,
        "api_key_env": settings.api_key_env,
        "max_tokens": settings.max_tokens,
    }
    if backend == "external":
        return LLMJudge(JudgeConfig(base_url=url or settings.base_url, model=model or settings.model or "", **common))
    from verl_parl.swarm.settings import swarm_settings

    ask = FrozenGroupAsk(
        swarm_settings(trainer_config).subagent, max_tokens=settings.max_tokens, timeout_s=settings.timeout_s
    )
    return LLMJudge(JudgeConfig(base_url=None, model=f"frozen:{ask.serving.model_path}", **common), ask=ask)


def takes_judge(fn: Any) -> bool:
    """Whether the score function ``fn`` accepts a ``judge`` keyword (or any keyword)."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "judge" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def cell_judge(judge: LLMJudge) -> CellJudge:
    """A table-cell judge (``TableSpec.judge``): asks whether a cell matches the gold cell of ``column``."""

    def judge_cell(column: str, pred: str, gold: str) -> float:
        return judge.judge(f"The value of column {column!r} in a table row.", pred, gold)

    return judge_cell
