"""Checkpoints shipped as package data, so that a first run need not train them (minutes on 2 cores).

A shipped checkpoint is an ordinary finished cache folder (weights, tokenizer, config, marker) under
``verl_parl_demo/modelbuild/weights/<name>/``; its marker records the recipe's ``digest`` and the weights'
``sha256``. A build function copies it into the cache instead of training only when both match, so a
changed recipe (or damaged weights) silently falls back to training, with a warning.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path

from verl_parl_demo.modelbuild.tiny import MARKER_NAME, is_complete_build

__all__ = ["SHIPPED_ROOT", "WEIGHTS_FILE", "matches", "publish", "ship", "weights_sha256"]

logger = logging.getLogger(__name__)

SHIPPED_ROOT = Path(__file__).parent / "weights"
WEIGHTS_FILE = "model.safetensors"


def weights_sha256(folder: Path) -> str:
    return hashlib.sha256((folder / WEIGHTS_FILE).read_bytes()).hexdigest()


def matches(folder: Path, digest: str) -> bool:
    """Whether ``folder`` holds a finished checkpoint of the recipe ``digest`` with intact weights."""
    if not is_complete_build(folder) or not (folder / WEIGHTS_FILE).exists():
        return False
    info = json.loads((folder / MARKER_NAME).read_text())
    if info.get("digest") != digest:
        logger.warning("the shipped checkpoint %s is for another recipe: training instead", folder.name)
        return False
    if info.get("sha256") != weights_sha256(folder):
        logger.warning("the shipped weights in %s do not match their recorded sha256: training instead", folder)
        return False
    return True


def ship(built: Path, name: str, root: Path = SHIPPED_ROOT) -> Path:
    """Copy the finished checkpoint ``built`` to ``root / name`` (the package data), replacing what was there."""
    if not is_complete_build(built):
        raise ValueError(f"{built} is not a finished checkpoint (no {MARKER_NAME})")
    out = root / name
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(built, out)
    for path in out.iterdir():
        path.chmod(0o644)  # safetensors writes its file private; package data is read by everyone
    return out


def publish(tmp: Path, final: Path) -> Path:
    """Rename the finished cache folder ``tmp`` to ``final``; if another builder won the race, keep theirs."""
    if final.exists() and not is_complete_build(final):
        shutil.rmtree(final, ignore_errors=True)
    try:
        tmp.rename(final)
    except OSError:
        if not is_complete_build(final):
            raise
    return final
