"""``faultload compare``: the same trial on two builds, interleaved, judged by ratios with intervals."""
