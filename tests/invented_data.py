"""Invented task data written inside a test (tmp_path): the shape of the DisCoTEX sub-task 1
release (file names, columns), made-up text. For tests about the tool's behaviour (warnings,
progress, run states, tables), which must not depend on the real release being here."""

from __future__ import annotations

from pathlib import Path

from abricot_local.tasks.discotex import RELEASE

WORDS = ("il gatto dorme sul divano", "la pioggia cade lenta", "un treno parte da Roma", "il mare era calmo",
         "le foglie cambiano colore", "la biblioteca apre alle nove", "un cane abbaia lontano",
         "il pane esce dal forno", "la neve copre i tetti", "una lettera arriva tardi")


def write_discotex(folder: Path, per_source: int = 8, *, classes=(0, 1), words: int = 1,
                   sources=tuple(RELEASE)) -> Path:
    """Release-shaped TSVs: ``per_source`` rows per source, CLASS cycling through ``classes``;
    ``words`` repeats the paragraph text (longer prompts)."""
    folder.mkdir(parents=True, exist_ok=True)
    for k, source in enumerate(sources):
        name = RELEASE[source][0]
        lines = ["ID\tPROMPT\tTARGET\tCLASS"]
        for i in range(per_source):
            text = " ".join(f"{WORDS[(i + j) % len(WORDS)]} ({source} {i}.{j})." for j in range(words))
            target = f"Poi {WORDS[(i * 3 + k) % len(WORDS)]}, riga {i} di {source}."
            lines.append(f"task_1_{source}_test_{i + 1}\t{text}\t{target}\t{classes[i % len(classes)]}")
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    return folder
