"""lm-evaluation-harness's model 'abricot-local' (model.py: the only importer of lm-eval) and its requests over a backend (requests.py)."""
