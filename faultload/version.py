"""faultload's version as installed: what ``faultload --version`` prints and a trial bundle records."""

from importlib import metadata

from faultload import __version__


def installed_version() -> str:
    """The installed distribution's version; the package's own when it runs from a checkout not installed."""
    try:
        return metadata.version("faultload")
    except metadata.PackageNotFoundError:
        return __version__


# What faultload's own clients send as ``sdk_version`` when they open a session (the SDK sends its own).
CLIENT_VERSION = f"faultload-{__version__}"
