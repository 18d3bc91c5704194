"""``faultload.suite.families``, the former name of ``faultload.suite.properties``, still serves properties written
against it: its ``Family`` is ``Property``, and the properties it names are the new module's."""

from __future__ import annotations


def test_the_former_module_gives_property_as_family() -> None:
    from faultload.suite import properties
    from faultload.suite.families import ALL, LOST, PROPERTIES, TRAINING, Family, checked, known_configs

    assert Family is properties.Property
    assert isinstance(Family("mine", ("bounded_fds",), ("bounded_fds",)), properties.Property)
    assert (ALL, LOST, PROPERTIES, TRAINING) == (
        properties.ALL,
        properties.LOST,
        properties.PROPERTIES,
        properties.TRAINING,
    )
    assert checked is properties.checked and known_configs is properties.known_configs
