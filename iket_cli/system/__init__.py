"""What iket needs of the machine it runs on: processes and their trees, the one subprocess
helper, signals, disk-full errors, the Slurm command line, machine facts and the toolchain
lookup (run-iket and NVIDIA's decoder).

The layer above :mod:`iket_cli.model`: capture, decode and analysis stand on it.
"""
