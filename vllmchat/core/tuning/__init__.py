"""Measured tuning: offload and thread sweeps (``tuner``), and the quant lab (``quant_lab``)."""
