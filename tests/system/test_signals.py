"""The publish hold: a value of the capture run (``Publishing(until_exit=...)``), no module flag."""

import signal

from iket_cli.system.signals import ALL_STOPS, Publishing, as_exception


def _handlers():
    return {signum: signal.getsignal(signum) for signum in ALL_STOPS}


def test_the_api_gets_its_handlers_back_after_a_publish():
    before = _handlers()
    with as_exception(), Publishing() as publishing:
        publishing.hold()
        publishing.published = "capture"
    assert _handlers() == before


def test_the_cli_hold_lasts_past_the_block_and_records_a_late_signal():
    before = _handlers()
    try:
        with as_exception(), Publishing(until_exit=True) as publishing:
            publishing.hold()
            publishing.published = "capture"
        late = signal.getsignal(signal.SIGTERM)
        assert late not in (before[signal.SIGTERM], signal.SIG_DFL)
        late(signal.SIGTERM, None)  # what a SIGTERM now does: recorded, not raised (the capture stands)
        assert publishing.arrived == [signal.SIGTERM]
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_a_hold_that_published_nothing_ends_with_its_block():
    before = _handlers()
    with as_exception(), Publishing(until_exit=True) as publishing:
        publishing.hold()
    assert _handlers() == before
