"""How iket shows things: terminal tables, the terminal timeline, the offline HTML report,
the live progress of a capture, and CI reports (JUnit, markdown summaries).

Imports :mod:`iket_cli.analysis` and the layers below it; the layers below never import this.
"""
