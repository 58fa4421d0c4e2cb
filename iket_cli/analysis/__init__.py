"""What a capture means: summaries, instrumentation lint, pass drift, differences between two
captures and the cost of the instrumentation. Plain data in, plain data out.

Imports :mod:`iket_cli.model` (and the drift hint of :mod:`iket_cli.capture`); never a renderer.
"""
