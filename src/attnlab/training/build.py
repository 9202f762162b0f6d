"""From a composed config to the objects of a run: corpus, tokenizer, data module, model, task.

The one place that reads ``cfg.data``, ``cfg.model``, ``cfg.attention``, ``cfg.posenc``, ``cfg.optim`` and
``cfg.decode``; everything it builds takes plain values or settings objects. ``attnlab-eval`` and the
tests rebuild models through ``build_model``.
"""

from __future__ import annotations

from hydra.utils import instantiate
from omegaconf import DictConfig, OmegaConf

from attnlab.data.corpus import Corpus
from attnlab.data.datamodule import TranslationDataModule
from attnlab.data.length_split import split_by_length
from attnlab.data.tokenizers.base import Tokenizer
from attnlab.model.spec import AttentionParts
from attnlab.model.transformer import Seq2Seq, build_transformer
from attnlab.training.decode import DecodeSettings
from attnlab.training.optim import OptimSettings, schedule_factor
from attnlab.training.task import TranslationTask


def attention_parts(cfg: DictConfig) -> AttentionParts:
    """The model's attention choices: ``attention/score``, ``attention/mask``, ``posenc``, the sites and
    the kernel (``attention.backend``)."""
    return AttentionParts(
        score=instantiate(cfg.attention.score),
        mask=instantiate(cfg.attention.mask),
        posenc=instantiate(cfg.posenc),
        score_sites=tuple(cfg.attention.score_sites),
        mask_sites=tuple(cfg.attention.mask_sites),
        padding_mask=cfg.attention.padding_mask,
        backend=cfg.attention.get("backend", "auto"),  # runs saved before the key existed: auto
    )


def build_model(cfg: DictConfig, vocab_size: int, pad_id: int) -> Seq2Seq:
    """The ``Seq2Seq`` model that ``cfg`` describes (sizes, score, mask, posenc, sites)."""
    return build_transformer(instantiate(cfg.model), attention_parts(cfg), vocab_size, pad_id)


def build_corpus(data: DictConfig) -> Corpus:
    """``data.corpus``, cut to ``data.max_train_words`` when set (train short, test long)."""
    corpus = instantiate(data.corpus)
    if data.get("max_train_words") is not None:
        corpus = split_by_length(corpus, data.max_train_words)
    return corpus


def build_tokenizer(data: DictConfig, corpus: Corpus) -> Tokenizer:
    """``data.tokenizer`` trained on both sides of the training split."""
    train = corpus.splits["train"]
    return instantiate(data.tokenizer)([p.src for p in train] + [p.tgt for p in train])


def build_datamodule(
    data: DictConfig, corpus: Corpus, tokenizer: Tokenizer, seed: int | None
) -> TranslationDataModule:
    """Batches of ``data.batch_size`` sentences, or of ``data.max_tokens`` tokens when that is set."""
    return TranslationDataModule(
        corpus, tokenizer, data.batch_size, data.eval_batch_size, data.get("max_tokens"), seed=seed
    )


def decode_settings(node: DictConfig | dict) -> DecodeSettings:
    """``decode.*`` as settings (unknown keys are refused by the dataclass)."""
    values = OmegaConf.to_container(node, resolve=True) if OmegaConf.is_config(node) else dict(node)
    return DecodeSettings(**values)


def build_task(cfg: DictConfig, model: Seq2Seq, tokenizer: Tokenizer, corpus: Corpus) -> TranslationTask:
    optim = OptimSettings(**OmegaConf.to_container(cfg.optim, resolve=True))
    schedule_factor(optim, cfg.trainer.get("max_steps"))  # a schedule that cannot run fails before training
    return TranslationTask(model, tokenizer, corpus.eval_splits, optim, decode_settings(cfg.decode))
