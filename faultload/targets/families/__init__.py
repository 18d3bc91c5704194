"""One module per server family, each an adapter behind ``faultload.targets.family.ServerFamily``."""
