"""The former name of :mod:`faultload.suite.properties`, kept for properties written against it.

``Family`` is :class:`~faultload.suite.properties.Property`; ``FAMILIES``, ``family_limits`` and
``family_examples`` are ``PROPERTIES``, ``property_limits`` and ``property_examples``. New code imports
``faultload.suite.properties``.
"""

from __future__ import annotations

from faultload.suite.properties import (
    ALL,
    COMBINED,
    COMPARATIVE,
    HEALTH,
    INTEGRITY,
    LOST,
    PROPERTIES,
    RESOURCES,
    RETRIES,
    SERVER_LOG,
    TRAINING,
    Property,
    checked,
    known_configs,
    property_examples,
    property_limits,
    target_figure,
)

Family = Property
FAMILIES = PROPERTIES
family_limits = property_limits
family_examples = property_examples

__all__ = [
    "ALL",
    "COMBINED",
    "COMPARATIVE",
    "FAMILIES",
    "HEALTH",
    "INTEGRITY",
    "LOST",
    "PROPERTIES",
    "RESOURCES",
    "RETRIES",
    "SERVER_LOG",
    "TRAINING",
    "Family",
    "Property",
    "checked",
    "family_examples",
    "family_limits",
    "known_configs",
    "property_examples",
    "property_limits",
    "target_figure",
]
