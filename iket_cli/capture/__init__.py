"""Running a workload under run-iket: targets, the toolchain, the resolved plan, the passes
and their process tree, output directories, the warm standby, the shim and the start-up hook.

Imports only :mod:`iket_cli.model` (and :mod:`iket_cli.errors`).
"""
