"""Where iket is hosted inside another tool: pytest (``pytest_support``) and IPython
(``ipython``). Beside ``cli``: each is a front end over :mod:`iket_cli.pipeline`."""
