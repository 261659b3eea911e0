"""A run: its plan (tasks, data, items), its execution, the output folder, merging shards, re-scoring a recorded run (check)."""
