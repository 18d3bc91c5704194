"""``pytest faultload``: the properties (``test_properties.py``), their engine and the pytest plugin."""
