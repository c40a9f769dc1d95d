"""Calls that download pretrained weights into the torch hub cache, one folder every process
shares: on N processes each fetches the same file at once unless the main process goes first.

Read from a call's qualified name and its keyword arguments' source text, so that the
lint (libcst) and the reading of a run's other files (ast) answer alike.
"""

from __future__ import annotations

# Calls that fetch a file of pretrained weights into the torch hub cache (the same folder
# for every process) whenever it is not there yet.
_WEIGHT_FETCHERS = {
    "torch.hub.load", "torch.hub.load_state_dict_from_url", "torch.hub.download_url_to_file",
    "torch.utils.model_zoo.load_url", "torchvision.models.utils.load_state_dict_from_url",
}
_WEIGHT_MODULES = ("torchvision.models.", "timm.")


def fetches_weights(qualified: str, keywords: dict[str, str]) -> bool:
    """A call that downloads pretrained weights: a torchvision (or timm) model built with
    `pretrained=True` or `weights=<not None>`, or torch.hub's loaders. `keywords`: each
    keyword argument's source text."""
    if qualified in _WEIGHT_FETCHERS:
        return True
    if not qualified.startswith(_WEIGHT_MODULES):
        return False
    pretrained = keywords.get("pretrained")
    weights = keywords.get("weights")
    return (pretrained is not None and pretrained not in ("False", "None", "0")) or (
        weights is not None and weights != "None"
    )


# torchtext's legacy data sets fetch their archive into `.data` whenever it is missing, with
# no `download=` switch, through their class methods (`Multi30k.splits(...)`,
# `WikiText2.iters(...)`); the data pipes of torchtext 0.12+ (`WikiText2(split="train")`)
# download lazily, as they are first read, so the construction is no place to order them
_TEXT_DATASET_MODULES = ("torchtext.datasets.", "torchtext.legacy.datasets.")
_TEXT_FETCHING_METHODS = (".splits", ".iters", ".download")


# pretrained word vectors fetched into `.vector_cache` when missing (BiDAF's `GloVe(name='6B')`)
_WORD_VECTORS = {f"torchtext{legacy}.vocab.{name}" for legacy in ("", ".legacy") for name in ("GloVe", "FastText", "CharNGram")}


def fetches_text_data(qualified: str) -> bool:
    """`torchtext.datasets.Multi30k.splits(...)`, `torchtext.legacy.datasets.IMDB.splits(...)`,
    `torchtext.vocab.GloVe(...)`: data torchtext downloads into the same folder on every process."""
    return qualified.startswith(_TEXT_DATASET_MODULES) and qualified.endswith(_TEXT_FETCHING_METHODS) or qualified in _WORD_VECTORS
