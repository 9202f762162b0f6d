"""``attnlab-eval``: translate a split or a file with a checkpoint and score it with sacreBLEU.

    attnlab-eval ckpt=outputs/2026-11-21/10-00-00/checkpoints/best.ckpt                # its test split
    attnlab-eval ckpt=… split=test_long decode.strategy=beam decode.beam_size=5
    attnlab-eval ckpt=… data=multi30k split=test                                      # another corpus
    attnlab-eval ckpt=… input=src.txt ref=ref.txt output=eval/mine

The run directory of the checkpoint (``<run dir>/checkpoints/<name>.ckpt``) supplies the model
config (``.hydra/config.yaml``) and the tokenizer (``tokenizer/``). Writes ``hyp.txt`` (detokenised, in
input order) and ``scores.json`` (BLEU, chrF, their sacreBLEU signatures, decode settings).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import hydra
import torch
from omegaconf import DictConfig, OmegaConf

from attnlab.cli.errors import exit_with_error, run_cli
from attnlab.config import CONF_DIR
from attnlab.rundir import RunDir, read_lines, write_lines

if TYPE_CHECKING:
    from attnlab.data.tokenizers.base import Tokenizer
    from attnlab.training.decode import DecodeSettings


def load_run(ckpt: Path) -> tuple[DictConfig, Tokenizer, torch.nn.Module]:
    """(training config, tokenizer, model with the checkpoint's weights) for a checkpoint file."""
    from attnlab.data.tokenizers import load_tokenizer
    from attnlab.training.checkpoints import load_model_weights

    if not ckpt.is_file():
        raise ValueError(f"ckpt={ckpt}: no such checkpoint file")
    run = RunDir.of_checkpoint(ckpt)
    train_cfg = run.config()
    if train_cfg is None:
        raise ValueError(
            f"ckpt={ckpt}: its run dir {run.path} has no readable .hydra/config.yaml (not an attnlab run?)"
        )
    tokenizer = load_tokenizer(run.tokenizer)
    return train_cfg, tokenizer, load_model_weights(train_cfg, tokenizer, ckpt)


@torch.no_grad()
def translate(
    model, tokenizer: Tokenizer, sentences: list[str], decode: DecodeSettings, batch_size: int
) -> list[str]:
    """Detokenised translations of ``sentences``, in order; batches are formed by source length."""
    from attnlab.data.datamodule import pad_sequences
    from attnlab.training.decode import decode_batch

    encoded = [tokenizer.encode(s) + [tokenizer.eos_id] for s in sentences]
    order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]))
    out: list[str] = [""] * len(encoded)
    for start in range(0, len(order), batch_size):
        rows = order[start : start + batch_size]
        src = pad_sequences([encoded[i] for i in rows], tokenizer.pad_id)  # (b, s)
        hyp = decode_batch(model, src, tokenizer.special_ids, decode)
        for r, i in enumerate(rows):
            out[i] = tokenizer.decode(hyp[r].tolist())
    return out


def _read_lines(path: str, key: str) -> list[str]:
    file = Path(path)
    if not file.is_file():
        raise ValueError(f"{key}={path}: no such file")
    return [line.strip() for line in read_lines(file)]


def evaluate(cfg: DictConfig) -> dict:
    """Runs one evaluation as configured; returns the scores written to ``scores.json``."""
    from dataclasses import asdict

    from sacrebleu.metrics import BLEU, CHRF

    from attnlab.training.build import build_corpus, decode_settings

    ckpt = Path(cfg.ckpt)
    train_cfg, tokenizer, model = load_run(ckpt)
    decode = decode_settings(
        {
            **OmegaConf.to_container(train_cfg.decode),
            **{k: v for k, v in OmegaConf.to_container(cfg.decode).items() if v is not None},
        }
    )
    if cfg.input:
        sources, name = _read_lines(cfg.input, "input"), Path(cfg.input).stem
        refs = _read_lines(cfg.ref, "ref") if cfg.ref else None
        if refs is not None and len(refs) != len(sources):
            raise ValueError(f"ref={cfg.ref} has {len(refs)} lines but input={cfg.input} has {len(sources)}")
    else:
        corpus = build_corpus(cfg.data if cfg.get("data") else train_cfg.data)
        if cfg.split not in corpus.splits or not corpus.splits[cfg.split]:
            raise ValueError(f"split={cfg.split} is not in the corpus; choose one of {sorted(corpus.splits)}")
        pairs = corpus.splits[cfg.split]
        sources, refs, name = [p.src for p in pairs], [p.tgt for p in pairs], cfg.split
    hyps = translate(model, tokenizer, sources, decode, cfg.batch_size)
    default_out = RunDir.of_checkpoint(ckpt).eval_output(f"{name}-{decode.strategy}")
    out_dir = Path(cfg.output) if cfg.output else default_out
    out_dir.mkdir(parents=True, exist_ok=True)
    write_lines(out_dir / "hyp.txt", hyps)
    scores = {"ckpt": str(ckpt), "source": name, "sentences": len(hyps), "decode": asdict(decode)}
    if refs is not None:
        bleu, chrf = BLEU(), CHRF()
        scores.update(
            bleu=bleu.corpus_score(hyps, [refs]).score,
            chrf=chrf.corpus_score(hyps, [refs]).score,
            bleu_signature=str(bleu.get_signature()),
            chrf_signature=str(chrf.get_signature()),
        )
    (out_dir / "scores.json").write_text(json.dumps(scores, indent=2) + "\n")
    scores["output"] = str(out_dir)
    return scores


@hydra.main(config_path=CONF_DIR, config_name="eval", version_base="1.3")
def main(cfg: DictConfig) -> None:
    try:
        scores = evaluate(cfg)
    except Exception as err:  # noqa: BLE001 - reported in one line
        exit_with_error("attnlab-eval", err)
    if "bleu" in scores:
        print(
            f"{scores['source']}: BLEU {scores['bleu']:.2f}  chrF {scores['chrf']:.2f}  "
            f"({scores['sentences']} sentences, {scores['decode']['strategy']})"
        )
        print(f"sacreBLEU {scores['bleu_signature']}")
    print(f"hypotheses and scores: {scores['output']}")


def cli() -> None:
    """Console entry point ``attnlab-eval``."""
    run_cli(main, "attnlab-eval")


if __name__ == "__main__":
    cli()
