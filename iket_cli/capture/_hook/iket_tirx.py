"""``--extract``'s record run: TIRx kernels that run outside run-iket.

A TIRx kernel compiled by ``IketProfiler.compile`` refuses to load without run-iket's
injection (``IketProfileError: ... CUDA_INJECTION64_PATH was not supplied by run-iket``), so a
model that calls one would never reach the call to record. :func:`plain` replaces that
compile in the record run only.
"""

#: TIRx's IKET module. Its ``IketProfiler.compile`` marks the module ``cuda.iket.enabled``, and
#: the executable refuses to load without run-iket's injection. The record run compiles the
#: same module without the mark: TIRx then lowers the IKET ops to nothing (measured on the
#: H200: the kernel runs and computes the same result), so the model reaches the chosen call.
TIRX_IKET = "tvm_tirx.backend.cuda.iket"


def plain(module):
    """Make ``IketProfiler.compile`` of TIRx's IKET ``module`` compile without IKET."""
    profiler = getattr(module, "IketProfiler", None)
    if profiler is None:
        return

    def compile(self, mod, target=None, *, tir_pipeline="tirx"):
        import tvm_tirx

        if isinstance(mod, tvm_tirx.tirx.Function):
            mod = tvm_tirx.IRModule.from_expr(mod)
        return _PlainExecutable(tvm_tirx.tirx.compile(mod, target=target, pipeline=tir_pipeline))

    profiler.compile = compile


class _PlainExecutable:
    """A TIRx executable compiled without IKET, called as the official one is."""

    def __init__(self, executable):
        self._executable = executable
        self._jitted = None

    @property
    def mod(self):
        return self._executable.mod

    def jit(self, *args, **kwargs):
        if self._jitted is None or kwargs.get("force_recompile"):
            self._jitted = self._executable.jit(*args, **kwargs)
        return self._jitted

    def __getitem__(self, name):
        def invoke(*args, **kwargs):
            return self.jit().get_function(name, query_imports=True)(*args, **kwargs)

        return invoke

    def __call__(self, *args, **kwargs):
        return self.jit().main(*args, **kwargs)
