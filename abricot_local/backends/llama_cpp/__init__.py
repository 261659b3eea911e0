"""The llama.cpp backend: backend.py and session.py are the only importers of llama_cpp; options.py imports no runtime."""
