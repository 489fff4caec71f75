"""An LLM judge on an OpenAI-compatible ``/chat/completions`` endpoint, with a cache and a
concurrency limit; every failure is an :class:`InfraFailureError` naming its cause, never a silent 0.

What judged Kimi-Researcher's *training* reward is not published (o3-mini was its evaluation judge),
so the endpoint, model and prompt are configuration. The judge answers with a verdict line
``VERDICT: CORRECT`` / ``VERDICT: INCORRECT`` (or a bare ``SCORE: 0.7``); anything else is
"nonsense" and marks the sample infra-failed.

Thread-safe and synchronous on purpose: verl's reward managers call score functions from executor
threads, so a threading semaphore bounds the requests of all of them together.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from verl_parl.rewards.infra import InfraFailureError
from verl_parl.rewards.table import CellJudge
from verl_parl.rewards.text_match import extract_answer

CORRECTNESS_TEMPLATE = (
    "You grade answers. Question:\n{question}\n\nReference answer:\n{gold}\n\nCandidate answer:\n{answer}\n\n"
    "Is the candidate answer correct, i.e. equivalent to the reference? Reply with exactly one line: "
    "VERDICT: CORRECT or VERDICT: INCORRECT."
)
TEMPLATES = {"correctness": CORRECTNESS_TEMPLATE}

_VERDICT = re.compile(r"VERDICT:\s*(CORRECT|INCORRECT)\b", re.IGNORECASE)
_SCORE = re.compile(r"SCORE:\s*([01](?:\.\d+)?)\b", re.IGNORECASE)


@dataclass(frozen=True)
class JudgeConfig:
    """Where and how to judge. ``base_url`` is e.g. ``http://127.0.0.1:8000/v1``."""

    base_url: str
    model: str
    template: str = "correctness"
    timeout_s: float = 60.0
    max_concurrency: int = 8
    cache_size: int = 4096
    api_key_env: str = "OPENAI_API_KEY"
    max_tokens: int = 64

    def __post_init__(self) -> None:
        errors = []
        if not self.base_url.startswith(("http://", "https://")):
            errors.append(f"judge.base_url: must be an http(s) URL, got {self.base_url!r}")
        if self.template not in TEMPLATES:
            errors.append(f"judge.template: {self.template!r} is not one of {sorted(TEMPLATES)}")
        if self.max_concurrency < 1:
            errors.append(f"judge.max_concurrency: must be >= 1, got {self.max_concurrency}")
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


class LLMJudge:
    """Calls the endpoint at most ``max_concurrency`` at a time; caches verdicts by prompt (LRU)."""

    def __init__(self, config: JudgeConfig) -> None:
        self.config = config
        self._slots = threading.BoundedSemaphore(config.max_concurrency)
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
            while len(self._cache) > self.config.cache_size:
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
        url = self.config.base_url.rstrip("/") + "/chat/completions"
        with self._slots:
            with self._lock:
                self.requests_sent += 1
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
        value = parse_verdict(self._post(prompt))
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


def llm_judge_scorer(solution_str: str, ground_truth: Any, extra_info: dict[str, Any] | None = None) -> dict[str, Any]:
    """Registered scorer ``llm_judge``: the judge's verdict on the final answer (question from
    ``extra_info["question"]``). Raises :class:`InfraFailureError` when the judge fails."""
    question = str((extra_info or {}).get("question", ""))
    score = judge_from_env().judge(question, extract_answer(solution_str), str(ground_truth))
    return {"score": score, "acc": float(score >= 0.5)}


def cell_judge(judge: LLMJudge) -> CellJudge:
    """A table-cell judge (``TableSpec.judge``): asks whether a cell matches the gold cell of ``column``."""

    def judge_cell(column: str, pred: str, gold: str) -> float:
        return judge.judge(f"The value of column {column!r} in a table row.", pred, gold)

    return judge_cell
