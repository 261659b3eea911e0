"""A run's record: results.json's schema as frozen dataclasses, and the one reader and writer.

``schema`` holds the sections (:class:`Record`, :class:`TaskEntry`, ...), ``samples`` the
sample line (:class:`Sample`), ``io`` reading and writing (results.json, the checkpoint's
manifest), ``codec`` the dataclass <-> JSON machinery, ``docs`` docs/RESULTS.md's tables.
Every module that reads a run reads it through here.
"""

from abricot_local.record.io import (CHECKPOINT, RESULTS, RUN_MANIFEST, Refusal, growth, read_manifest, read_record,
                                     read_run, record_from_json, refused, resume_refusal, same_items, sample_words,
                                     to_json, write_manifest, write_record)
from abricot_local.record.samples import (Sample, check_line, check_rows, entry_counted, entry_samples, parse_samples,
                                          read_samples, run_samples, samples_path)
from abricot_local.record.schema import (SCHEMA_VERSION, Bootstrap, ChatWrap, DataFile, Manifest, Model,
                                         Provenance, Published, PublishedCheck, Record, RunConfig, Settle,
                                         SettleLook, SettleQuestion, SkippedTask, TaskEntry, TaskPlugin,
                                         metric_items)

__all__ = [
    "CHECKPOINT", "RESULTS", "RUN_MANIFEST", "SCHEMA_VERSION", "Bootstrap", "ChatWrap", "DataFile", "Manifest",
    "Model", "Provenance", "Published", "PublishedCheck", "Record", "RunConfig", "Sample", "Settle", "SettleLook",
    "SettleQuestion", "SkippedTask",
    "TaskEntry", "TaskPlugin", "check_line", "check_rows", "entry_counted", "entry_samples", "growth", "metric_items", "parse_samples", "run_samples",
    "samples_path", "read_manifest", "read_record", "read_run", "read_samples",
    "record_from_json", "Refusal", "refused", "resume_refusal", "same_items", "sample_words", "to_json", "write_manifest", "write_record",
]
