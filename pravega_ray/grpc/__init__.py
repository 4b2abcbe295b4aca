"""Pravega's controller gRPC API over a pravega-ray controller (docs/grpc.md).

:func:`serve` answers Pravega's own clients (the official Python client ``pravega``, module
``pravega_client``) at the controller's gRPC address; the schema is pravega-ray's own
declaration (:mod:`pravega_ray.grpc.schema`, readable as ``controller.proto``).
"""

from __future__ import annotations

from pravega_ray.grpc.schema import message_class, method_path, proto_text
from pravega_ray.grpc.server import GrpcServer, fixed_endpoint, is_loopback, serve
from pravega_ray.grpc.service import ControllerCalls, ControllerServicer, UriFor

__all__ = [
    "ControllerCalls",
    "ControllerServicer",
    "GrpcServer",
    "UriFor",
    "fixed_endpoint",
    "is_loopback",
    "message_class",
    "method_path",
    "proto_text",
    "serve",
]
