"""Code run on a module the moment its own code has run, without importing it early.

The start-up hook wraps CuTe DSL's IKET dialect ops this way, ``--extract``'s record run wraps
FUNC and makes TIRx's IKET compile plain, and an in-process window stands TIRx's run-iket
check aside: each waits for a module the workload may import late, or never. One finder for
all of them (imported by the hook as a top-level module, by iket_cli as a package one).
"""

import sys


class AfterImport:
    """A finder that finds nothing itself: when a module named in ``names`` is imported, the
    usual finders load it and ``action(module)`` runs once the module's code has run.

    ``once``: leave ``sys.meta_path`` at the first such import (else keep watching: a script
    imported as ``__main__`` and again by its name). A failure to find the module is left to the
    usual finders, which then say it as if this one were not there."""

    def __init__(self, names, action, once=False):
        self.names = frozenset(names)
        self.action = action
        self.once = once

    def find_spec(self, name, path=None, target=None):
        if name not in self.names:
            return None
        import importlib.util

        sys.meta_path.remove(self)  # no recursion into this finder below
        try:
            spec = importlib.util.find_spec(name)
        except Exception:
            spec = None
        finally:
            if not self.once:
                sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        run, action = spec.loader.exec_module, self.action

        def exec_module(module):
            run(module)
            action(module)

        spec.loader.exec_module = exec_module
        return spec


def after_import(names, action, once=False):
    """Watch for ``names`` (see :class:`AfterImport`); the finder installed first in line."""
    finder = AfterImport(names, action, once)
    sys.meta_path.insert(0, finder)
    return finder
