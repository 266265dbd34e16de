"""What a text means, as a vector: a static table of token vectors that ``nearest`` fuses with the lexical score.

The table is the project's own (``meaning_table.safetensors`` beside this module, 8.3 MB): one
256-dimension row per token of Llama 2's 32,000-token vocabulary, read with WordLlama's tokenizer.
It started as WordLlama's ``l2_supercat`` table (MIT) and was taught to give the sentence vectors
that all-MiniLM-L6-v2 (Apache-2.0), a small transformer that reads context, gives 102,933
short texts about what software does (Debian's package descriptions, Python docstrings), in its first
256 principal directions (``benchmarks/search_data/train_meaning.py`` says how, and reproduces
it). A text's vector is the mean of its tokens' rows, normalised, so two texts' cosine is a dot
product and embedding a query is a tokenizer call and a few table lookups (tens of
microseconds), with no neural network run per search; MiniLM itself ranks better still but takes
5-8 ms a query here. Each row is stored as int8 with one float32 scale; it is read as float16.

The tokenizer ships inside the ``wordllama`` wheel, a dependency, and the table inside this
package: nothing is fetched at run time. Only the tokenizer file is read from wordllama (and,
for training, its table): wordllama's own code is never imported (its import configures the
root logger, and its later releases carry compiled parts this needs none of).

Loaded at most once per process (``Meaning.load``), from the index's worker thread, never at
startup: numpy and tokenizers are imported there. When they or the files are missing or broken,
``load`` says why once in the log and returns None, and the index ranks lexically alone.

Chosen over the other embedders measured on the bench (docs/TOOLS.md): WordLlama's table as it
ships, a 64-dimension int8 model2vec-style model (tokenlearn-static-model), paraphrase-MiniLM-L3
(ONNX) and MiniLM's own token vectors without training (model2vec's distillation) all ranked
lower; all-MiniLM-L6-v2 itself ranked higher but cannot search within 5 ms.
"""

from __future__ import annotations

import json
import logging
import math
import threading
from collections.abc import Sequence
from importlib.util import find_spec
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray
    from tokenizers import Tokenizer

__all__ = ["DIMENSIONS", "TABLE", "Meaning"]

log = logging.getLogger(__name__)

DIMENSIONS = 256
"""The table's width: MiniLM's first 256 principal directions (of 384)."""
TABLE = Path(__file__).with_name("meaning_table.safetensors")
_WORDLLAMA_WEIGHTS = ("weights", "l2_supercat_256.safetensors")
_TOKENIZER = ("tokenizers", "l2_supercat_tokenizer_config.json")
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


_DTYPES = {"F16": "float16", "F32": "float32", "I8": "int8"}


def read_tensors(path: Path) -> dict[str, NDArray[Any]]:
    """The tensors of a safetensors file (an 8-byte header length, a JSON header, the data);
    float16, float32 and int8 only."""
    import numpy as np

    data = path.read_bytes()
    size = int.from_bytes(data[:8], "little")
    header: dict[str, Any] = json.loads(data[8 : 8 + size])
    tensors: dict[str, NDArray[Any]] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype = np.dtype(_DTYPES[entry["dtype"]])
        start, end = entry["data_offsets"]
        count = math.prod(entry["shape"])
        if count * dtype.itemsize != end - start:
            raise ValueError(f"{path.name}: {name} has {end - start} bytes for shape {entry['shape']}")
        tensors[name] = np.frombuffer(data, dtype=dtype, count=count, offset=8 + size + start).reshape(entry["shape"])
    return tensors


def _read_table(path: Path) -> NDArray[np.float16]:
    """The meaning table: int8 rows times their float32 scales, as float16."""
    import numpy as np

    tensors = read_tensors(path)
    rows, scales = tensors["rows"], tensors["scales"]
    if rows.ndim != 2 or scales.shape != (rows.shape[0],):
        raise ValueError(f"{path.name}: rows {rows.shape} and scales {scales.shape} do not match")
    return (rows.astype(np.float32) * scales[:, None]).astype(np.float16)


def write_table(table: NDArray[np.float32], path: Path) -> None:
    """The meaning table as ``_read_table`` reads it: int8 rows and one float32 scale per row, as a
    safetensors file (``benchmarks/search_data/train_meaning.py`` writes the shipped one)."""
    import numpy as np

    scales: NDArray[np.float32] = (np.abs(table).max(1) / 127.0).astype(np.float32)
    scales[scales == 0.0] = 1.0
    rows: NDArray[np.int8] = np.round(table / scales[:, None]).astype(np.int8)
    header = {
        "rows": {"dtype": "I8", "shape": list(rows.shape), "data_offsets": [0, rows.nbytes]},
        "scales": {
            "dtype": "F32",
            "shape": list(scales.shape),
            "data_offsets": [rows.nbytes, rows.nbytes + scales.nbytes],
        },
    }
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(len(encoded).to_bytes(8, "little") + encoded + rows.tobytes() + scales.tobytes())


def _read_tokenizer(folder: Path) -> Tokenizer:
    from tokenizers import Tokenizer

    path = folder.joinpath(*_TOKENIZER)
    if not path.is_file():
        raise FileNotFoundError(f"no {path.name} in the wordllama package")
    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception for a file it cannot parse
        raise ValueError(f"{path.name}: {exc}") from exc
    tokenizer.no_padding()
    return tokenizer


class Meaning:
    """A text encoder: ``encode(texts)`` gives one unit vector per text (float32 rows)."""

    def __init__(self, table: NDArray[np.float16], tokenizer: Tokenizer) -> None:
        self.table = table
        self.tokenizer = tokenizer
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
            folder = _package_dir()
            if folder is None:
                log.info("search ranks by words alone: the wordllama package is not installed")
                return None
            table = _read_table(TABLE)
            tokenizer = _read_tokenizer(folder)
            if tokenizer.get_vocab_size() != table.shape[0]:
                raise ValueError(f"{TABLE.name} has {table.shape[0]} rows for {tokenizer.get_vocab_size()} tokens")
        except (ImportError, OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("search ranks by words alone: the meaning model did not load (%s)", exc)
            return None
        return cls(table, tokenizer)

    @classmethod
    def load_wordllama(cls) -> Meaning | None:
        """WordLlama's own table with its tokenizer, untrained: what ``train_meaning.py`` starts from."""
        folder = _package_dir()
        if folder is None:
            return None
        table = read_tensors(folder.joinpath(*_WORDLLAMA_WEIGHTS))["embedding.weight"]
        return cls(table[:, :DIMENSIONS], _read_tokenizer(folder))

    def knows(self, word: str) -> bool:
        """Whether ``word`` (lowercase) is a whole word of the model's vocabulary, one token:
        "paint" is, "zzqx" (four pieces) is not."""
        return self.tokenizer.token_to_id(_WORD_START + word) is not None

    def encode(self, texts: Sequence[str]) -> NDArray[np.float32]:
        """One normalised mean-of-tokens vector per text; a text with no tokens gets zeros."""
        import numpy as np

        vectors = np.zeros((len(texts), self.dimensions), dtype=np.float32)
        table = self.table
        tokenizer = self.tokenizer
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
