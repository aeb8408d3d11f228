"""Grading of accuracy items: the sandbox for untrusted generated code, HumanEval's check
program, and RULER's string match (LowBArena's accuracy axis)."""
