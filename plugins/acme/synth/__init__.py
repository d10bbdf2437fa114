"""Synthetic data generators calibrated to the published AcmeTrace figures."""
