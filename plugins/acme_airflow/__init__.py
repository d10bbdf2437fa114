"""Airflow adapters of the acme package: Assets, default task arguments, the lake from connections."""
