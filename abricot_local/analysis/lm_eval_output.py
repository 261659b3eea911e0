"""A finished run in lm-eval's own results layout (lm-eval 0.4.10+: its EvaluationTracker and
``lm_eval.result_schema``), so that tools reading lm-eval output take abricot-local runs as they are:
``<out>/<model_name_sanitized>/results_<date>.json`` (``results``, ``group_subtasks``, ``configs``,
``versions``, ``n-shot``, ``higher_is_better``, ``n-samples``, ``config``, ``task_hashes``, ``chat_template``...) and
``samples_<task>_<date>.jsonl``, one line per item with lm-eval's fields (``doc_id``, ``doc``,
``target``, ``arguments``, ``resps``, ``filtered_resps``, ``filter``, ``metrics``, the three hashes,
``acc``). Task names are sanitized as lm-eval's (``\\W`` -> ``_``: ``abricot@calamita`` ->
``abricot_calamita``; two keys that would share a name have their separators spelled out,
``task_names``; the abricot-local key kept as its ``alias``); a metric's value is
``"<metric>,none"``, its stderr ``"N/A"`` (abricot-local records a 95% CI, kept in the task's
``configs[...]["metadata"]["ci95"]``). A run does not record whether a continuation was the greedy
one: ``is_greedy`` is ``False``, as abricot-local's lm-eval model answers when it does not know.
``n-samples``' ``original`` is the items scored too (a run records its --limit/--sample/--shard in
``metadata``, not the release's size; its data files too, ``metadata.data``, where the export read back alone
finds its items). The run's provenance is ``config.abricot_local``, as `abricot-local
lm-eval` writes it (:func:`own_provenance`): the export reads back as its run (model, options, backend,
kernels). Names no task: every number is read from the record. An output
folder inside a run folder is refused (the run would then list two runs), and so is an lm-eval output
read as a run (it is in this layout already)."""

from __future__ import annotations

import hashlib
import json
import re
from datetime import datetime, timezone
from pathlib import Path

from abricot_local.errors import ResultsError, UsageError
from abricot_local.record import CHECKPOINT, RESULTS, Record

FILTER = "none"
_NOT_DOC = {"logprobs", "pred", "pred_label", "context", "continuations", "continuation_tokens"}


def hash_string(text: str) -> str:
    """lm-eval's ``utils.hash_string``."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def task_name(key: str) -> str:
    """lm-eval's ``sanitize_task_name``."""
    return re.sub(r"\W", "_", key)


_SPELLED = {"@": "_at_", "~": "_v_"}  # a protocol's and a prompt variant's separators, spelled out


def task_names(keys) -> dict[str, str]:
    """Each task key's lm-eval name: ``task_name``, unless two keys would share it (``abricot_abs@calamita``
    and ``abricot_abs~calamita`` of a ``--prompt-variant all`` run): then those keys' separators are spelled
    out (``abricot_abs_at_calamita``, ``abricot_abs_v_calamita``), the key kept as the task's ``alias``."""
    keys = list(keys)
    plain = [task_name(k) for k in keys]
    names = {}
    for key, name in zip(keys, plain):
        if plain.count(name) > 1:
            name = re.sub(r"\W", lambda m: _SPELLED.get(m[0], f"_{ord(m[0]):x}_"), key)
        names[key] = name
    clash = [k for k in keys if list(names.values()).count(names[k]) > 1]
    if clash:
        raise ResultsError(f"tasks {', '.join(map(repr, clash))} all become {names[clash[0]]!r} in lm-eval's names")
    return names


def model_name_sanitized(name: str) -> str:
    """lm-eval's ``sanitize_model_name``."""
    return re.sub(r"[\"<>:/|\\?*\[\]]+", "__", name)


def date_id(record: Record) -> str:
    """The run's time as lm-eval names its files (``isoformat()`` with ``-`` for ``:``), in UTC."""
    when = datetime.fromisoformat(record.created) if record.created else datetime.now(timezone.utc)
    if when.tzinfo is not None:
        when = when.astimezone(timezone.utc).replace(tzinfo=None)
    return when.isoformat().replace(":", "-")


def sample_line(doc_id: int, s) -> dict:
    """One item as lm-eval's ``SampleResult`` (a multiple-choice task's loglikelihood requests)."""
    conts = list(s.continuations) if s.continuations else [f" {c}" for c in s.choices]
    doc = {k: v for k, v in s.line.items() if k not in _NOT_DOC}
    context = s.context or ""
    target = s.gold
    line = {
        "doc_id": doc_id, "doc": doc, "target": str(target),
        "arguments": {f"gen_args_{i}": {"arg_0": context, "arg_1": c} for i, c in enumerate(conts)},
        "resps": [[[str(lp), "False"]] for lp in s.logprobs],
        "filtered_resps": [[str(lp), "False"] for lp in s.logprobs],
        "filter": FILTER, "metrics": ["acc"],
        "doc_hash": hash_string(json.dumps(doc, indent=2, ensure_ascii=False)),
        "prompt_hash": hash_string(context), "target_hash": hash_string(str(target)),
        "acc": float(s.pred == s.gold),
    }
    return line


def chat_keys(prov) -> dict:
    """lm-eval's keys of the chat template a run rendered its prompts with (``null`` without one): the
    template as abricot-local's lm-eval model gives it (its user turn around ``{message}``, with the generation
    prompt), its ``hash_string``; each prompt, shots included, one user turn (``fewshot_as_multiturn`` false)."""
    wrap = prov.chat_template if prov else None
    template = f"{wrap.head}{{message}}{wrap.tail}" if wrap else None
    return {"system_instruction": None, "system_instruction_sha": None,
            "fewshot_as_multiturn": False if wrap else None, "chat_template": template,
            "chat_template_sha": hash_string(template) if template else None}


def own_provenance(record: Record) -> dict:
    """``config.abricot_local`` as `abricot-local lm-eval` writes it (lm_eval/requests.py: the provenance `run`
    records, with the model and config beside it), so that the reader (lm_eval_input.py) reads the run's model,
    settings, backend and kernels back: the record's provenance (its chat template is lm-eval's own keys'), its
    ``model``, its ``config`` (the tasks, seed and limit are lm-eval's own keys', and the reader's)."""
    prov = {k: v for k, v in record.provenance.to_dict().items() if k != "chat_template"} if record.provenance else {}
    config = {k: v for k, v in record.config_dict().items() if k not in ("tasks", "seed", "limit")}
    return {**prov, "model": record.model.to_dict(), "config": config}


def _shot_seed(record: Record, seed: int | None) -> int | None:
    """lm-eval's ``fewshot_seed`` of a run: the shot seed its tasks record (one for all), else its ``--seed``."""
    seeds = {e.config.get("shot_seed") for e in record.tasks.values() if "shot_seed" in e.config}
    return seeds.pop() if len(seeds) == 1 else seed


def layout(run) -> tuple[dict, dict[str, list[dict]]]:
    """(the results document, lm-eval task name -> its sample lines) of a finished run (analysis.runs.Run)."""
    record = run.record
    cfg = record.config
    seed = cfg.seed if cfg else None
    results, configs, versions, shots, better, counts, samples, hashes = {}, {}, {}, {}, {}, {}, {}, {}
    names = task_names(record.tasks)
    for key, entry in record.tasks.items():
        name = names[key]
        metrics = {"alias": key}
        ci95 = {}
        for metric, value, ci in entry.metric_items():
            metrics[f"{metric},{FILTER}"] = value
            metrics[f"{metric}_stderr,{FILTER}"] = "N/A"
            if ci:
                ci95[metric] = [ci[0], ci[1]]
        results[name] = metrics
        n_shot = run.task(key).options.shots or 0
        configs[name] = {"task": name, "output_type": "multiple_choice", "num_fewshot": n_shot,
                         "metadata": {"version": entry.version, "abricot_local_task": key, "config": entry.config,
                                      "prompt_hash": entry.prompt_hash, "ci95": ci95, "chance": entry.chance,
                                      "limit": cfg.limit if cfg else None, "sample": cfg.sample if cfg else None,
                                      "shard": cfg.shard if cfg else None, "warnings": list(entry.warnings),
                                      "data": [f.to_dict() for f in entry.data]}}  # found again when read back
        versions[name] = entry.version
        shots[name] = n_shot
        better[name] = {metric: None for metric, _, _ in entry.metric_items()}  # tasks declare no direction
        counts[name] = {"original": entry.n, "effective": entry.n}
        lines = [sample_line(i, s) for i, s in enumerate(run.samples_of(key))]
        samples[name] = lines
        hashes[name] = hash_string("".join(x["doc_hash"] + x["prompt_hash"] + x["target_hash"] for x in lines))
    model = run.model_label
    prov = record.provenance
    doc = {
        "results": results, "group_subtasks": {name: [] for name in results}, "configs": configs,
        "versions": versions, "n-shot": shots, "higher_is_better": better, "n-samples": counts,
        "config": {"model": "abricot-local", "model_args": {"model": model, "backend": record.backend},
                   "abricot_local": own_provenance(record),
                   "model_sha": record.model.sha256, "batch_size": None, "limit": cfg.limit if cfg else None,
                   "random_seed": seed, "fewshot_seed": _shot_seed(record, seed),
                   "abricot_local_version": prov.abricot_local if prov else None},
        "git_hash": None,
        "date": datetime.fromisoformat(record.created).timestamp() if record.created else None,
        "model_source": "abricot-local", "model_name": model, "model_name_sanitized": model_name_sanitized(model),
        "task_hashes": hashes, **chat_keys(prov),
        "total_evaluation_time_seconds": str(record.wall_seconds) if record.wall_seconds is not None else None,
    }
    return doc, samples


def inside_a_run(out: Path) -> Path | None:
    """The run folder ``out`` lies in (or is), if any: a folder holding results.json or a checkpoint."""
    for p in (out, *out.parents):
        if (p / RESULTS).exists() or (p / CHECKPOINT).exists():
            return p
    return None


def export(run, out) -> Path:
    """Write the layout of ``run`` (analysis.runs.Run) under ``out`` (every file whole, atomically); the
    model's folder. Refused: ``out`` inside a run folder, ``out``, the model's folder or a file in it a link (or
    read-only), or ``run`` an lm-eval output."""
    from abricot_local.jsonfiles import atomic_write
    from abricot_local.names import path_part
    from abricot_local.record.outputs import output_file, output_folder

    if run.lm_eval:
        raise UsageError(f"{run.path} is an lm-eval output already; the lm-eval layout is written of runs of "
                         "abricot-local")
    doc, samples = layout(run)
    where = Path(out) / path_part(doc["model_name_sanitized"], "model")  # a model `..` stays inside ``out``
    home = inside_a_run(where.absolute())
    if home is not None:
        raise UsageError(f"{out} is inside the run folder {home}: the export would be read as a second run there; "
                         "give a folder outside any run")
    for folder in (Path(out), where):  # no link, none read-only (record.outputs)
        output_folder(folder)
    stamp = date_id(run.record)
    files = {where / f"samples_{name}_{stamp}.jsonl": "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
             for name, lines in samples.items()}
    files[where / f"results_{stamp}.json"] = json.dumps(doc, indent=2, ensure_ascii=False)
    for path in files:
        output_file(path)
    for path, text in files.items():
        atomic_write(path, text)
    return where
