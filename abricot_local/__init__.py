"""abricot-local: Italian benchmark tasks (ABRICOT, DISCOTEX) on local GGUF models via llama.cpp.

Importing this package never loads llama.cpp; only ``abricot_local.backends.llama_cpp`` does.
"""

__version__ = "0.1.0"
