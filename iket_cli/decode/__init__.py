"""Raw captures into artifacts. The basic path: ``tasks`` (what there is to decode) →
``pool`` (many tasks at once, within the CPUs and the memory) → ``workers`` (the worker
processes, some started ahead by ``prestart``) → ``worker_main`` (one worker process) →
``decoder`` (NVIDIA's decoder, one task). ``split/`` exports a big process's JSON (joined
back byte for byte) and Perfetto trace (joined into the same trace; ``json_split`` and
``pftrace_split`` run them in the pool) by launch and CTA chunk.

Imports only :mod:`iket_cli.model` and :mod:`iket_cli.system`; never a renderer.
"""
