"""Time predictions before and after a model's file is on disk (issue 39 item 4).

    abricot-local run MODEL --tasks discotex --sample 4 --threads 2 --dry-run --calibrate   # each model, once
    python bench/estimated_facts.py smollm2-135m-pypi gemma-3-270m

For each model named (a registry alias whose file is here and which is calibrated on this machine),
and each other calibrated model with the same settings as the reference: the 512-token prompt time
`run --dry-run` predicts by scaling the reference's calibration (run/calibration.speed_for:
Calibration.scaled) with the facts of the file's GGUF header (the file is here) and with the facts its
registry entry gives (before the download: run/model_facts.facts_of, the width estimated from the
parameter count), each with its stated band,
against the model's own calibration (the truth here). Nothing is run: calibrations.json is read.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from abricot_local.models.ref import local_file, lookup_alias  # noqa: E402
from abricot_local.run import calibration  # noqa: E402
from abricot_local.run.cost import Work  # noqa: E402
from abricot_local.run.model_facts import facts_of, gguf_facts  # noqa: E402

PROMPT = Work(1, 512, 1, 1, 512 * 511 // 2)  # one 512-token prompt from position 0, one output row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="+")
    args = ap.parse_args()
    from abricot_local import hashing

    entries = calibration.load()
    print("| model | reference | facts | width | predicted s | band | own calibration s | truth / predicted | within |")
    print("|---|---|---|---|---|---|---|---|---|")
    for alias in args.models:
        spec = lookup_alias(alias)
        path = local_file(spec)
        if path is None:
            print(f"{alias}: its file is not here", file=sys.stderr)
            continue
        sha = spec.sha256_for(0) or hashing.sha256_file(path)
        own = [c for c in entries if c.sha256 == sha]
        if not own:
            print(f"{alias}: not calibrated (run --dry-run --calibrate first)", file=sys.stderr)
            continue
        mine = own[-1]
        truth = mine.speed(mine.facts, same=True).seconds(PROMPT)
        header = gguf_facts(path)
        guess = facts_of(spec)  # as the dry run has them before the download
        for ref in [c for c in entries if c.sha256 != sha and c.settings == mine.settings and c.facts]:
            for name, facts in (("GGUF header", header), ("registry entry", guess)):
                speed = ref.scaled(facts)
                predicted = speed.seconds(PROMPT)
                q = truth / predicted
                print(f"| {alias} | {ref.model} | {name} | {facts.width:.0f} | {predicted:.1f} | ±{speed.error:.0%} | "
                      f"{truth:.1f} | {q:.2f} | {'yes' if abs(q - 1) <= speed.error else 'NO'} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
