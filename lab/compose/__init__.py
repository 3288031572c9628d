"""The composed lab (``lab.compose.lab``), imported as ``lab.compose`` by its users."""

from lab.compose.lab import Lab, LabConfig, LabNode, LabNotReady, _make_provider, wait_for

__all__ = ["Lab", "LabConfig", "LabNode", "LabNotReady", "_make_provider", "wait_for"]
