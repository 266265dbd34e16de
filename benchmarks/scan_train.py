"""Train the scan's learned reading (``mcp_patchbay.trust.learned``) and choose its two thresholds.

    .venv/bin/python -m benchmarks.scan_train            # train, report, write learned_model.bin
    .venv/bin/python -m benchmarks.scan_train --dry-run  # report only

What it learns from (labelled, never a held-out set): the tune set (``tests/fixtures/poisoned_tools.json``),
``benchmarks/scan_data/``'s blind sets measured once and then tuned on and its training sets (``TRAIN_SETS``), the
real tools of ``benchmarks/search_data/catalog.json`` as honest. The held-out sets (``BLIND_SETS``) are
refused: a figure on them counts only if nothing learned from them.

How: every definition's strings as ``learned.features`` hashes them, TF-IDF weighted (smoothed IDF,
``1 + log`` counts, L2-normalised rows), and an L2-regularised logistic regression with balanced class
weights, fitted by L-BFGS in numpy (no scikit-learn: the problem is small and convex, 2,000 rows).

The thresholds: each set is scored by a model trained without it (leave one set out; the catalog in
five folds), and the scan's rule (``scan.Scanner``: the model holds at ``holds`` or above, and clears a
pattern's finding about the text below ``clears``) is tried on the sets named by ``--calibrate`` (sets
the patterns were never tuned on, so their findings there are as they would be on a new set). The pair
kept holds the most of those sets' poisoned definitions while no set (each scored by a model that did
not learn from it) holds more than ``--honest-limit`` of its honest ones, nor the catalog more than
``--catalog-limit`` of its tools. Every set's figures under the pair are
printed: for the calibration sets they are the fitted figures, for the others figures of a model that
did not see them (the patterns did).
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from tests.scan_figures import POISONED, catalog_listings, read_set  # noqa: E402

from mcp_patchbay.trust.fingerprint import Kind, definition_of  # noqa: E402
from mcp_patchbay.trust.learned import MODEL_FILE, Model, Thresholds, counted, features  # noqa: E402
from mcp_patchbay.trust.scan import ScanContext, Scanner, weighed_by_model  # noqa: E402
from mcp_patchbay.trust.strings import units  # noqa: E402

DATA = ROOT / "benchmarks" / "scan_data"
TRAIN_SETS = (
    "blind_set.json",
    "blind_set_3.json",
    "blind_set_4.json",
    "blind_set_5.json",
    "blind_set_6.json",
    "blind_set_7.json",
    "blind_set_8.json",
    "blind_set_9.json",
    "blind_set_10.json",
    "blind_set_11.json",
    "blind_set_12.json",
    "blind_set_13.json",
    "train_set_a.json",
    "train_set_b.json",
)
"""Sets learned from: the blind sets were each measured once and then tuned on; the training sets were
written to be learned from, by hands that never read the scan."""
BLIND_SETS = ("blind_set_14.json", "blind_set_15.json")
BUCKETS = 1 << 17
C = 64.0
"""The inverse of the L2 penalty, as scikit-learn's ``C`` (on the summed, class-weighted loss)."""
WORDS = 30
"""The fewest words the model is let judge a definition on, whatever the sets say: on fewer it reads a
word or two as the whole ("Lists extra things." reads as poisoned to it, a word poisoned texts use a lot),
and the patterns decide alone."""
OUTPUT = ROOT / "src" / "mcp_patchbay" / "trust" / MODEL_FILE


@dataclass
class Case:
    group: str
    poisoned: bool
    family: str
    texts: list[str]
    words: int
    pattern_holds: bool
    """A finding the model weighs holds it (the model may clear it)."""
    unseen_holds: bool
    """A finding the model does not weigh (``scan.weighed_by_model``) holds it."""


def load_cases(names: Sequence[str]) -> list[Case]:
    scanner = Scanner.default(learned=False)
    cases: list[Case] = []
    for name in ("tune", *names):
        path = POISONED if name == "tune" else DATA / name
        if not path.exists():
            print(f"(no {path.relative_to(ROOT)}: left out)")
            continue
        data = read_set(path)
        others: dict[str, list[str]] = data.get("other_servers", {})
        for label in ("poisoned", "benign"):
            for item in data[label]:
                kind: Kind = "prompt" if item.get("kind") == "prompt" else "tool"
                definition = definition_of(item["definition"], kind)
                server = str(item["server"])
                listings = {s: [{"name": t} for t in tools] for s, tools in item.get("other_servers", others).items()}
                listings[server] = [*listings.get(server, []), definition]
                found = scanner.scan(definition, kind, server=server, context=ScanContext.of(listings))
                cases.append(
                    _case(name, label == "poisoned", str(item.get("family", "")), definition, kind, found=found)
                )
    listings = catalog_listings()
    context = ScanContext.of(listings)
    for server, definitions in listings.items():
        for index, definition in enumerate(definitions):
            found = scanner.scan(definition, "tool", server=server, context=context)
            cases.append(_case(f"catalog-{index % 5}", False, "real", definition, "tool", found=found))
    return cases


def _case(group: str, poisoned: bool, family: str, definition: Any, kind: Kind, *, found: Sequence[Any]) -> Case:
    holding = [f for f in found if f.holds]
    return Case(
        group,
        poisoned,
        family,
        texts := [u.text for u in units(definition, kind)],
        counted(texts, BUCKETS)[1],
        any(weighed_by_model(f) for f in holding),
        any(not weighed_by_model(f) for f in holding),
    )


@dataclass
class Matrix:
    """Rows of hashed counts, as CSR arrays (numpy only)."""

    data: NDArray[np.float64]
    indices: NDArray[np.int64]
    rows: NDArray[np.int64]
    count: int

    @classmethod
    def of(cls, cases: Sequence[Case]) -> Matrix:
        data: list[float] = []
        indices: list[int] = []
        rows: list[int] = []
        for row, case in enumerate(cases):
            for bucket, count in features(case.texts, BUCKETS).items():
                indices.append(bucket)
                data.append(1.0 + float(np.log(count)))
                rows.append(row)
        return cls(np.array(data), np.array(indices, dtype=np.int64), np.array(rows, dtype=np.int64), len(cases))

    def weighted(self, idf: NDArray[np.float64]) -> Matrix:
        values = self.data * idf[self.indices]
        norms = np.sqrt(np.bincount(self.rows, weights=values * values, minlength=self.count))
        norms[norms == 0] = 1.0
        return Matrix(values / norms[self.rows], self.indices, self.rows, self.count)

    def dot(self, vector: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.bincount(self.rows, weights=self.data * vector[self.indices], minlength=self.count).astype(np.float64)

    def dot_t(self, vector: NDArray[np.float64]) -> NDArray[np.float64]:
        return np.bincount(self.indices, weights=self.data * vector[self.rows], minlength=BUCKETS).astype(np.float64)


def idf_of(matrix: Matrix) -> NDArray[np.float64]:
    """Smoothed IDF, as scikit-learn's: ``log((1 + n) / (1 + df)) + 1``."""
    seen = np.bincount(matrix.indices, minlength=BUCKETS)
    return np.log((1.0 + matrix.count) / (1.0 + seen)) + 1.0


def fit(x: Matrix, y: NDArray[np.float64], iterations: int = 300) -> tuple[NDArray[np.float64], float]:
    """Coefficients and intercept minimising ``C * sum(w_i * logloss_i) + |coef|^2 / 2`` (L-BFGS)."""
    positives = float(y.sum())
    weights = np.where(y > 0, len(y) / (2 * positives), len(y) / (2 * (len(y) - positives)))

    def loss(theta: NDArray[np.float64]) -> tuple[float, NDArray[np.float64]]:
        coef, intercept = theta[:-1], theta[-1]
        z = x.dot(coef) + intercept
        signed = np.where(y > 0, -z, z)
        value = C * float(np.sum(weights * np.logaddexp(0.0, signed))) + 0.5 * float(coef @ coef)
        error = C * weights * (1.0 / (1.0 + np.exp(-z)) - y)
        grad = np.concatenate([x.dot_t(error) + coef, [error.sum()]])
        return value, grad

    return _lbfgs(loss, np.zeros(BUCKETS + 1), iterations)


def _lbfgs(
    loss: Any, theta: NDArray[np.float64], iterations: int, memory: int = 10
) -> tuple[NDArray[np.float64], float]:
    value, grad = loss(theta)
    steps: list[tuple[NDArray[np.float64], NDArray[np.float64], float]] = []
    for _ in range(iterations):
        direction = -grad
        alphas: list[float] = []
        for s, t, rho in reversed(steps):
            alpha = rho * float(s @ direction)
            alphas.append(alpha)
            direction = direction - alpha * t
        if steps:
            s, t, _rho = steps[-1]
            direction = direction * (float(s @ t) / float(t @ t))
        for (s, t, rho), alpha in zip(steps, reversed(alphas), strict=True):
            beta = rho * float(t @ direction)
            direction = direction + (alpha - beta) * s
        slope = float(grad @ direction)
        if slope >= 0:
            direction, slope, steps = -grad, -float(grad @ grad), []
        size = 1.0 if steps else 1.0 / max(1.0, float(np.abs(grad).max()))
        while True:
            trial = theta + size * direction
            new_value, new_grad = loss(trial)
            if new_value <= value + 1e-4 * size * slope or size < 1e-12:
                break
            size *= 0.5
        s, t = trial - theta, new_grad - grad
        if float(s @ t) > 1e-12:
            steps = [*steps[-(memory - 1) :], (s, t, 1.0 / float(s @ t))]
        converged = abs(value - new_value) <= 1e-9 * max(1.0, abs(value))
        theta, value, grad = trial, new_value, new_grad
        if converged or float(np.abs(grad).max()) < 1e-6:
            break
    return theta[:-1], float(theta[-1])


def train(cases: Sequence[Case]) -> Model:
    counts = Matrix.of(cases)
    idf = idf_of(counts)
    y = np.array([1.0 if c.poisoned else 0.0 for c in cases])
    coef, intercept = fit(counts.weighted(idf), y)
    return Model(idf.tolist(), coef.tolist(), intercept, Thresholds(holds=1.0, clears=0.0))


def out_of_fold(cases: Sequence[Case]) -> list[float]:
    """Each case's probability from a model trained without its group (set, or catalog fold)."""
    chances = [0.0] * len(cases)
    for group in sorted({c.group for c in cases}):
        model = train([c for c in cases if c.group != group])
        for index, case in enumerate(cases):
            if case.group == group:
                chances[index] = model.probability(case.texts)
    return chances


def held(case: Case, chance: float, thresholds: Thresholds) -> bool:
    """The scan's rule (``scan._weigh``), on a case's pattern findings and the model's probability."""
    if case.words < thresholds.words:
        return case.unseen_holds or case.pattern_holds
    return case.unseen_holds or chance >= thresholds.holds or (case.pattern_holds and chance >= thresholds.clears)


def figures(cases: Sequence[Case], chances: Sequence[float], thresholds: Thresholds) -> dict[str, list[int]]:
    """Per group (catalog folds as one): [poisoned held, poisoned, honest held, honest]."""
    out: dict[str, list[int]] = {}
    for case, chance in zip(cases, chances, strict=True):
        row = out.setdefault("catalog" if case.group.startswith("catalog") else case.group, [0, 0, 0, 0])
        hit = held(case, chance, thresholds)
        row[0 if case.poisoned else 2] += hit
        row[1 if case.poisoned else 3] += 1
    return out


def choose(
    cases: Sequence[Case],
    chances: Sequence[float],
    calibrate: Sequence[str],
    *,
    honest_limit: float,
    catalog_limit: float,
    words_floor: int,
) -> Thresholds:
    """The pair that holds the most of the calibration sets' poisoned definitions while every set holds at
    most ``honest_limit`` of its honest ones and the catalog at most ``catalog_limit`` of its tools (each
    scored by a model that did not learn from it)."""
    best: tuple[float, float, Thresholds] | None = None
    for words, clears, holds in itertools.product(
        (words_floor, words_floor + 10, words_floor + 20),
        (0.0, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4),
        (*(round(0.5 + 0.025 * step, 3) for step in range(20)), 1.01),
    ):
        pick = Thresholds(holds, clears, words)
        rows = figures(cases, chances, pick)
        chosen = [rows[g] for g in calibrate if g in rows]
        caught = sum(r[0] for r in chosen) / max(1, sum(r[1] for r in chosen))
        worst = max(r[2] / r[3] for name, r in rows.items() if name != "catalog" and r[3])
        catalog = rows["catalog"][2] / max(1, rows["catalog"][3])
        if worst > honest_limit or catalog > catalog_limit:
            continue
        key = (caught, -worst)
        if best is None or key > (best[0], best[1]):
            best = (caught, -worst, pick)
    if best is None:
        raise SystemExit("no thresholds meet the limits")
    return best[2]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--calibrate", default="train_set_a.json,train_set_b.json")
    parser.add_argument("--honest-limit", type=float, default=0.035, help="of any set's honest definitions")
    parser.add_argument("--catalog-limit", type=float, default=0.002, help="of the catalog's real tools")
    parser.add_argument(
        "--words", type=int, default=WORDS, help="the fewest words the model may judge a definition on (or more)"
    )
    parser.add_argument(
        "--keep-thresholds",
        action="store_true",
        help="learn the weights again and keep the shipped thresholds (after the patterns learned from the"
        " calibration sets, which no longer measure them)",
    )
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args(argv)
    calibrate = [name for name in args.calibrate.split(",") if name]
    if any(name in BLIND_SETS for name in calibrate):
        parser.error("a held-out set is never learned or calibrated on")
    cases = load_cases(TRAIN_SETS)
    chances = out_of_fold(cases)
    thresholds = (
        Model.default().thresholds
        if args.keep_thresholds
        else choose(
            cases,
            chances,
            calibrate,
            honest_limit=args.honest_limit,
            catalog_limit=args.catalog_limit,
            words_floor=args.words,
        )
    )
    print(
        f"thresholds: with {thresholds.words} words or more, holds at {thresholds.holds}, clears below"
        f" {thresholds.clears} (calibrated on {calibrate})"
    )
    alone = figures(cases, chances, Thresholds(holds=1.01, clears=0.0))  # the model never holds nor clears
    for group, row in figures(cases, chances, thresholds).items():
        before = alone[group]
        print(
            f"  {group:22} poisoned {row[0]}/{row[1]} ({row[0] / max(1, row[1]):.1%}), honest held {row[2]}/{row[3]}"
            f" ({row[2] / max(1, row[3]):.1%});  patterns alone {before[0]}/{before[1]}, {before[2]}/{before[3]}"
        )
    if args.dry_run:
        return 0
    model = train(cases)
    final = Model(model.idf, model.coef, model.intercept, thresholds)
    trained_on = sorted({c.group.split("-")[0] if c.group.startswith("catalog") else c.group for c in cases})
    about = f"trained on {len(cases)} definitions: {', '.join(trained_on)}"
    OUTPUT.write_bytes(final.to_bytes({"about": about, "c": C}))
    print(f"wrote {OUTPUT.relative_to(ROOT)} ({OUTPUT.stat().st_size:,} bytes): {about}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
