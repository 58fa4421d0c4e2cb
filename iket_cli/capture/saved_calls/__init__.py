"""The saved-calls engine (``--extract``, ``--replay``): the workload runs once without
run-iket while FUNC's chosen calls are saved, then the two passes replay only those calls;
saved calls from elsewhere run only where trusted."""
