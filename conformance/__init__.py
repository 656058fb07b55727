"""Conformance: Hypothesis state machines that drive the implementation and the model side by side."""
