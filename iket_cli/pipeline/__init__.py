"""The orchestration of iket's commands: ``profile`` (one capture), ``run`` (the configured
jobs), ``merge`` and ``postprocess``, each sequencing the stages below it.

Imports every layer below; only :mod:`iket_cli.cli` and the public API import it.
"""
