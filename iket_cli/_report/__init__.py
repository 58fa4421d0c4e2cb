"""The page template of ``iket report`` (package data)."""
