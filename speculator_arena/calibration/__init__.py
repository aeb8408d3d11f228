"""Calibration (protocol section 10, SCORING.md "Calibration"): the runs of a task, the m/c fit,
the calibrated values derived from the stored scores, and the protocol candidate with its
evidence; an operator publishes a candidate as the next version (publish.py).

Modules: plan (which runs), runs (run them, idempotent by id), derive (the rules as pure
functions), fit (m and c), candidate (the document and evidence), evidence (its table), plots,
publish, calibrate (the steps in order).
"""
