"""What iket knows about: the manifest and its one builder, the trace model and its readers,
Perfetto traces, the raw capture's event reader, process labels, and the vocabulary of
names, formats and choices.

The bottom layer: it imports nothing of iket's but :mod:`iket_cli.errors`.
"""
