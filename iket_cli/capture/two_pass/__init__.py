"""The two-pass engine: run-iket's tracker pass sizes the budget, its capture pass records; the
trackers kept for reuse, the warm standby that starts a script's passes early, the workload's
stdin shared by both passes, and the budget checked against what the tracker counted."""
