"""What a capture means: summaries, instrumentation lint, pass drift, differences between two
captures and the cost of the instrumentation. Plain data in, plain data out.

Imports only :mod:`iket_cli.model` and :mod:`iket_cli.system`; never a renderer.
"""
