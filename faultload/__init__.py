"""faultload: property-based fault-injection and load suite for Tinker-API servers."""

__version__ = "0.1.0"


def installed_version() -> str:
    """The installed distribution's version; the package's own when it runs from a checkout not installed.

    What ``faultload --version`` prints and a trial bundle records.
    """
    from importlib import metadata  # not at the top: every spawned load worker imports this package

    try:
        return metadata.version("faultload")
    except metadata.PackageNotFoundError:
        return __version__
