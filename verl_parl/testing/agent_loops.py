"""Drive a verl agent loop in-process against a server object, without Ray or an LLM server manager.

Also verl's own partial-rollout client over an in-process server (:func:`fully_async_client`), and
:class:`HeldForward`, which stops a server's engine at an exact token so that an abort or a checkpoint
switch lands mid-generation on every run. Used by the component tests (and available to plugin authors'
own tests); import it directly, it is not re-exported from :mod:`verl_parl.testing` so that importing
the contract kit stays light.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from omegaconf import DictConfig, OmegaConf

from verl_parl.cli.evaluate import ServerClient

DirectClient = ServerClient
"""The part of verl's LLMServerClient an agent loop uses, calling a server object in-process."""


class LocalActor:
    """An object behind a Ray actor handle's interface, in this process: ``handle.method.remote(...)``
    starts ``obj.method(...)`` at once and returns an awaitable of its result (a coroutine method runs
    as a task, as a Ray call runs whether or not the caller awaits it). Lets verl's clients, which talk
    to Ray actors, drive in-process servers whose engine a test can reach into."""

    def __init__(self, obj: Any) -> None:
        self._obj = obj

    def __getattr__(self, name: str) -> SimpleNamespace:
        method = getattr(self._obj, name)

        def remote(*args: Any, **kwargs: Any) -> asyncio.Future[Any]:
            result = method(*args, **kwargs)
            if inspect.isawaitable(result):
                return asyncio.ensure_future(result)
            done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            done.set_result(result)
            return done

        return SimpleNamespace(remote=remote)


class HeldForward:
    """Wraps a model's forward: its ``at``-th call waits until :attr:`release` is set (:attr:`reached` is set
    when it starts waiting). In the CPU engine, call 1 is a request's prefill and each later call a decode
    step, each sampling one token; commands posted meanwhile (an abort, a close) apply right after the held
    step, so a lone request has exactly ``at`` tokens when they do."""

    def __init__(self, model: Any, at: int, timeout: float = 120) -> None:
        self.at, self.calls, self.timeout = at, 0, timeout
        self.reached, self.release = threading.Event(), threading.Event()
        self._forward = model.forward
        model.forward = self

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        if self.calls == self.at:
            self.reached.set()
            self.release.wait(timeout=self.timeout)  # a guard against a hung test, not a timing assumption
        return self._forward(*args, **kwargs)


def fully_async_client(server: Any, response_length: int | None = None) -> Any:
    """verl's own partial-rollout client, ``FullyAsyncLLMServerClient`` (what verl's async trainer modes
    hand agent loops), routing through verl's own ``GlobalRequestLoadBalancer`` to ``server`` in this
    process. An aborted response is resubmitted by verl's code, exactly as in a training run.
    ``response_length`` is the rollout config's budget the client falls back to without ``max_tokens``."""
    from verl.workers.rollout.llm_server import FullyAsyncLLMServerClient
    from verl.workers.rollout.router import GlobalRequestLoadBalancer

    rollout = {"name": "hf", "full_determinism": False, "response_length": response_length}
    config = OmegaConf.create({"actor_rollout_ref": {"rollout": rollout}})
    balancer = LocalActor(GlobalRequestLoadBalancer({"hf://local": LocalActor(server)}))
    return FullyAsyncLLMServerClient(config=config, load_balancer_handle=balancer)


def make_loop(
    loop_cls: type, cfg: DictConfig, server: Any, model_path: Path, server_manager: Any = None, **kwargs: Any
) -> Any:
    """An instance of the agent loop ``loop_cls`` for the trainer config ``cfg``, generating on ``server``
    (through ``server_manager`` when given, e.g. :func:`fully_async_client`, else a :data:`DirectClient`)."""
    from verl.experimental.agent_loop.agent_loop import DictConfigWrap
    from verl.utils import hf_tokenizer
    from verl.utils.dataset.rl_dataset import RLHFDataset

    return loop_cls(
        trainer_config=DictConfigWrap(cfg),
        server_manager=server_manager if server_manager is not None else DirectClient(server),
        tokenizer=hf_tokenizer(str(model_path)),
        processor=None,
        dataset_cls=RLHFDataset,
        data_config=DictConfigWrap(cfg.data),
        hf_model_type="qwen2",
        **kwargs,
    )
