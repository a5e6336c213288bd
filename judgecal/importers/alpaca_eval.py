"""AlpacaEval model outputs (tatsu-lab/alpaca_eval ``results/<model>/model_outputs.json``).

A JSON array of ``{dataset, instruction, output, generator}``; one file is one producing model
(``generator``; mixed generators in one file are accepted and kept apart). Items are matched by
instruction text across files. ``pairs`` lists (concise file, verbose file): for every
instruction present in both, a verbosity pair (concise response, verbose response) is recorded.
"""

from __future__ import annotations

from pathlib import Path

from judgecal.errors import InputError
from judgecal.importers.records import Fields, ImportBatch, RespRef, read_json_array


def parse(paths: list[Path], family: str, pairs: list[tuple[Path, Path]] = ()) -> ImportBatch:
    """Parse AlpacaEval output files (and the files named in ``pairs``). Raises InputError."""
    batch = ImportBatch(source="alpaca_eval")
    files = list(dict.fromkeys([Path(p) for p in paths] + [Path(p) for pair in pairs for p in pair]))
    by_file: dict[Path, dict[str, RespRef]] = {}
    for path in files:
        seen: dict[str, RespRef] = {}
        for line, obj in read_json_array(path):
            f = Fields(obj, str(path), line)
            instruction = f.text("instruction", allow_empty=False)
            ref = batch.add_response(RespRef(family, instruction, f.text("generator", allow_empty=False), f.text("output")))
            if instruction in seen:
                raise f.fail("instruction appears twice in this file (one output per instruction expected)")
            seen[instruction] = ref
        by_file[path] = seen
    for concise, verbose in pairs:
        c, v = by_file[Path(concise)], by_file[Path(verbose)]
        common = [k for k in c if k in v]
        if not common:
            raise InputError(f"no instruction in common with {verbose}: cannot form verbosity pairs", source=str(concise))
        batch.verbosity_pairs.extend((c[k], v[k]) for k in common)
    return batch
