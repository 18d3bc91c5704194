"""The tinker SDK's own proto encoder and decoder for training calls, and zstd: the proto encoding's parts.

A module of its own so that only a training worker that speaks proto loads
tinker (~450 modules) and zstandard: ``training_bodies`` imports it when a
proto codec is built.
"""

from __future__ import annotations

import zstandard
from tinker import types
from tinker.proto.request_conv import forward_backward_request_to_proto
from tinker.proto.response_conv import deserialize_forward_backward_output

__all__ = ["types", "forward_backward_request_to_proto", "deserialize_forward_backward_output", "compressor"]


def compressor() -> zstandard.ZstdCompressor:
    return zstandard.ZstdCompressor()
