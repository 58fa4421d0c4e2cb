"""Running a workload under run-iket: targets, the resolved plan, the passes, output
directories, the warm standby, the shim and the start-up hook, the record run of --extract.

Imports only :mod:`iket_cli.model` and :mod:`iket_cli.system` (and :mod:`iket_cli.errors`).
"""
