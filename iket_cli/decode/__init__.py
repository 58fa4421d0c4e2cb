"""Raw captures into artifacts. The plain path: ``tasks`` (what there is to decode) →
``pool`` (many tasks at once, within the CPUs and the memory; ``schedule``: its slots, the
batches of split exports and the queue its long-lived workers serve) → ``workers`` (the
worker processes, some started ahead by ``prestart``) → ``worker_main`` (one worker
process) → ``decoder`` (NVIDIA's decoder, one task). The fast path, ``split/``, exports a
big process's JSON (joined back byte for byte) and Perfetto trace (joined into the same
trace) by launch and CTA chunk, one wing each; the plain path names only its registry.

Imports only :mod:`iket_cli.model` and :mod:`iket_cli.system`; never a renderer.
"""
