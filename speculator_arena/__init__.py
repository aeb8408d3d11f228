"""SpeculatorArena: measure how much faster a speculative decoder serves real traffic, losslessly."""

__version__ = "0.1.0"
