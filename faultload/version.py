"""faultload's version as installed: what ``faultload --version`` prints and a trial bundle records."""

from importlib import metadata

from faultload import __version__


def installed_version() -> str:
    """The installed distribution's version; the package's own when it runs from a checkout not installed."""
    try:
        return metadata.version("faultload")
    except metadata.PackageNotFoundError:
        return __version__
