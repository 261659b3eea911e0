"""The GGUF format read without llama.cpp: the file check, header facts, sizes and quant tags."""
