"""The gRPC API: the server (`server.ApiServer`, two TLS listeners, no plaintext port) and the client
library the CLI and agents use (`client.Client`); protos in `proto/`, generated code in `gen/`."""

from ccattler.engine.api.client import ApiError, Client

__all__ = ["ApiError", "Client"]
