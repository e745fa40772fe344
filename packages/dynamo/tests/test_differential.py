"""A bounded slice of the differential fuzzer (differential.py): every snippet alone, and
random programs of several snippets, eagerly and captured through the "eager" backend, must
give the same results, inputs after mutation and module state. The whole corpus with counts,
side by side with torch.compile: ``python benchmarks/dynamo_differential.py``."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

import differential as D  # noqa: E402

import danlu_dynamo  # noqa: E402

# Snippets that still give a wrong result or raise on their own, and why. Each is checked to
# still fail (strict xfail): a fix shows up as a test to update, not as silence.
KNOWN_WRONG: dict[str, str] = {}
# Snippets that compile again on every call (a value they change is guarded by value).
RECOMPILES_EACH_CALL = {
    "try_finally": "a counter in a global dict is guarded by value",
    "class_counter": "a counter on the class is guarded by value",
}

RANDOM_SEEDS = range(120)


def _run(source, name):
    danlu_dynamo.reset()
    compile_fn, counts = D.danlu_dynamo_runner()
    return D.check(source, compile_fn, counts, name=name)


@pytest.mark.parametrize("snip", D.SNIPPETS, ids=[s.name for s in D.SNIPPETS])
def test_each_snippet_alone(snip):
    outcome = _run(D.snippet_program(snip), f"snippet_{snip.name}")
    assert outcome.status != "eager_error", outcome.detail  # the snippet itself is valid
    if snip.name in KNOWN_WRONG:
        if outcome.status == "correct":
            pytest.fail(f"{snip.name} is correct now: remove it from KNOWN_WRONG")
        pytest.xfail(KNOWN_WRONG[snip.name])
    assert outcome.status == "correct", outcome.detail
    if snip.name not in RECOMPILES_EACH_CALL:
        assert outcome.recompiles == 0, f"{snip.name} compiled again on a later call"


def test_random_programs():
    counts = {"correct": 0, "skipped": 0}
    failures = []
    for seed in RANDOM_SEEDS:
        if D.snippets_of(seed) & KNOWN_WRONG.keys():
            counts["skipped"] += 1
            continue
        outcome = _run(D.program(seed), f"seed_{seed}")
        if outcome.status == "eager_error":  # shapes the generator combined badly
            counts["skipped"] += 1
            continue
        if outcome.status != "correct":
            failures.append((seed, outcome.status, outcome.detail[:500]))
        else:
            counts["correct"] += 1
    assert not failures, failures
    assert counts["correct"] >= 30, counts  # the slice must keep testing something
