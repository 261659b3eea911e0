"""Models: names and the registry, where files come from (hub, PyPI, other tools' stores, URLs), the model reference (found, checked, hashed), the machine's facts (doctor)."""
