"""The in-process engine: the ctypes binding of run-iket's session C ABI (``session``), the live
process made ready for it (``live``: kernels loaded, synchronised, signals held), and the one
run of a workload with windows in its own processes (``child``: ``--window``, ``--one-pass``)."""
