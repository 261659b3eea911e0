"""Finished runs read (Run, labels), compared item by item (paired statistics), held against published numbers."""
