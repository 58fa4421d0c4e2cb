"""Holds sitecustomize.py, the start-up hook put on the capture passes\x27 PYTHONPATH."""
