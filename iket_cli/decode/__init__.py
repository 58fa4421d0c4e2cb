"""Raw captures into artifacts: the decode tasks, NVIDIA's decoder per task, the worker pool,
and the JSON export split by launch and merged back byte for byte.

Imports :mod:`iket_cli.capture` and :mod:`iket_cli.model`; never a renderer.
"""
