"""Models: the picker, downloads, remote servers, draft models and the quant lab."""
