"""``faultload setup`` and ``faultload doctor``: what they build and install, and their checks."""

# What setup builds from Go sources into the workspace's tools folder (faultload.setup.provision): said once
# here, for the command's help and the documents (a test holds them to it).
BUILT_TOOLS = ("Toxiproxy", "the compiled router", "the compiled client")
SETUP_SUMMARY = (
    f"build {', '.join(BUILT_TOOLS[:-1])} and {BUILT_TOOLS[-1]} and install target venvs, each when missing "
    "(idempotent)"
)
