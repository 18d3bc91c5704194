"""faultload: property-based fault-injection and load suite for Tinker-API servers."""

__version__ = "0.1.0"
