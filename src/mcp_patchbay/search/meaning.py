"""What a text means, as a vector: static token embeddings that ``index`` fuses with its lexical score.

The model is WordLlama's ``l2_supercat`` (MIT): a 32,000-token table of 256-dimension vectors
trained from Llama 2's token embeddings for sentence similarity, and Llama 2's tokenizer. A
text's vector is the mean of its tokens' rows, normalised, so two texts' cosine is a dot
product and embedding a query is a tokenizer call and a few table lookups (tens of
microseconds), with no neural network run per search. Both files ship inside the
``wordllama`` wheel, a dependency; nothing is fetched at run time. Only the two data files
are read: wordllama's own code is never imported (its import configures the root logger,
and its later releases carry compiled parts this needs none of).

Loaded at most once per process (``Meaning.load``), from the index's worker thread, never at
startup: numpy and tokenizers are imported there. When they or the files are missing,
``load`` says why once in the log and returns None, and the index ranks lexically alone.

Chosen over the other embedders that a package carries, measured on the bench (see
docs/TOOLS.md): a 64-dimension int8 model2vec-style model (tokenlearn-static-model) ranked
far lower; all-MiniLM-L6-v2 (int8 ONNX) ranked a little higher alone but took 5-7 ms per
query and 19 s to embed 522 tools.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

__all__ = ["DIMENSIONS", "Meaning"]

log = logging.getLogger(__name__)

DIMENSIONS = 256
"""The table's own width. Its first 64 or 128 dimensions also work (it was trained nested),
and ranked lower on the bench."""
_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
_TENSOR = "embedding.weight"
_WORD_START = "\u2581"
"""How Llama's tokenizer marks a token that starts a word."""
_MAX_TOKENS = 256
"""A text is embedded from its first tokens only: a tool's purpose is said first, and a mean
over a long schema's words says less."""

_lock = threading.Lock()
_loaded: list[Meaning | None] = []


def _package_dir() -> Path | None:
    """wordllama's folder, found without importing the package."""
    spec = find_spec("wordllama")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _read_safetensors(path: Path, name: str) -> NDArray[np.float16]:
    """One float16 tensor of a safetensors file: an 8-byte header length, a JSON header, the data."""
    import numpy as np

    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header: dict[str, Any] = json.loads(data[8 : 8 + size])
    entry = header[name]
    if entry["dtype"] != "F16":
        raise ValueError(f"{path.name}: {name} is {entry['dtype']}, not F16")
    start, end = entry["data_offsets"]
    rows, cols = entry["shape"]
    table = np.frombuffer(data, dtype=np.float16, count=rows * cols, offset=8 + size + start)
    if table.nbytes != end - start:
        raise ValueError(f"{path.name}: {name} has {end - start} bytes for shape {rows}x{cols}")
    return table.reshape(rows, cols)


class Meaning:
    """A text encoder: ``encode(texts)`` gives one unit vector per text (float32 rows)."""

    def __init__(self, table: NDArray[np.float16], tokenizer: Tokenizer) -> None:
        self._table = table
        self._tokenizer = tokenizer
        self.dimensions: int = int(table.shape[1])

    @classmethod
    def load(cls) -> Meaning | None:
        """The process's encoder, loaded at the first call (about 0.2 s); None when it cannot be."""
        with _lock:
            if not _loaded:
                _loaded.append(cls._load())
            return _loaded[0]

    @classmethod
    def _load(cls) -> Meaning | None:
        try:
            from tokenizers import Tokenizer

            folder = _package_dir()
            if folder is None:
                log.info("search ranks by words alone: the wordllama package is not installed")
                return None
            table = _read_safetensors(folder.joinpath(*_WEIGHTS), _TENSOR)[:, :DIMENSIONS]
            tokenizer = Tokenizer.from_file(str(folder.joinpath(*_TOKENIZER)))
        except (ImportError, OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("search ranks by words alone: the meaning model did not load (%s)", exc)
            return None
        tokenizer.no_padding()
        return cls(table, tokenizer)

    def knows(self, word: str) -> bool:
        """Whether ``word`` (lowercase) is a whole word of the model's vocabulary, one token:
        "paint" is, "zzqx" (four pieces) is not."""
        return self._tokenizer.token_to_id(_WORD_START + word) is not None

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised mean-of-tokens vector per text; a text with no tokens gets zeros."""
        import numpy as np

        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        table = self._table
        tokenizer = self._tokenizer
        # One text (a query) is encoded on this thread: a batch goes to the tokenizer's thread
        # pool, whose hand-off cost searches 4-5 ms at p99 on two busy cores.
        if len(texts) == 1:
            encodings = [tokenizer.encode(texts[0], add_special_tokens=False)]
        else:
            encodings = tokenizer.encode_batch(list(texts), add_special_tokens=False)
        for row, encoding in enumerate(encodings):
            ids = encoding.ids[:_MAX_TOKENS]
            if ids:
                vectors[row] = table[ids].mean(axis=0, dtype=np.float32)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        norms[norms == 0.0] = 1.0
        vectors /= norms
        return vectors
